"""Image pretext tasks: rotation, jigsaw and Jigsaw-R1's pair, multiple-choice, single-piece and box
questions, Spatial-SSRL's patch reordering, flipped patch and crop inpainting, SSL4RL's patch
position and contrastive pairs."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())  # a new task file needs no edit here
