"""GUI and embodied inverse dynamics (UI-Shift) and GUI grounding, with the items they consume."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())  # a new task file needs no edit here
