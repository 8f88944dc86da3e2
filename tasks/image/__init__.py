"""Image pretext tasks: rotation prediction and jigsaw ordering."""

from tasks.image.jigsaw import Jigsaw
from tasks.image.rotation import Rotation

__all__ = ["Jigsaw", "Rotation"]
