"""Callbacks observe training and export results; removing one never changes what is learned (except
`Curriculum` and `DifficultySampler`, which drive the data module's stages and item weights by
design). Every submodule is imported here and its classes re-exported, a new file included."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())
