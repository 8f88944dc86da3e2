"""Self-supervised pretext tasks: example generators plus verifiers, usable without Lightning.

Every submodule is imported here and its classes re-exported, so ``tasks.<ClassName>`` works on the
command line for any task file, including a new one, with no edit elsewhere.
"""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())
