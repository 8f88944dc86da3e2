"""Point-cloud pretext tasks: rotation prediction and slab jigsaw."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())  # a new task file needs no edit here
