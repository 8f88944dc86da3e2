"""Audio pretext tasks (jigsaw, anomaly grounding, speed) and labelled audio multiple choice
(R1-AQA)."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())  # a new task file needs no edit here
