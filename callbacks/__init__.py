"""Callbacks observe training and export results; removing one never changes what is learned (except
`Curriculum`, which drives the data module's curriculum stages by design). Every submodule is imported here
and its classes re-exported, a new file included."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())
