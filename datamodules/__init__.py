"""Lightning DataModules that compose raw-media sources with pretext tasks into batches of
`tasks.Example`.

Imports no model code: the data is model-agnostic, the policy encodes it. Every submodule is
imported here and its classes re-exported (``datamodules.ImageFolder`` on the command line), a new
file included.
"""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())
