"""Tools for multi-turn rollouts (crop and zoom, frame seek) and what every turn loop shares
(`tasks.tools.base`)."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())  # a new tool file needs no edit here
