"""RGB-D pretext tasks: depth ordering of marked points (Visual Jigsaw 3D), regional depth ordering
and relative 3D position (Spatial-SSRL). Each shows the RGB image with numbered markers; the answers
come from the depth."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())  # a new task file needs no edit here
