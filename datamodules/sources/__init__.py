"""Raw-media sources: indexable collections of items of one modality that pretext tasks turn into
examples.

Every submodule is imported here and its classes re-exported: a new source file needs no edit
elsewhere."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())
