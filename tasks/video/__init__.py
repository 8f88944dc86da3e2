"""Video pretext tasks: temporal jigsaw, anomaly grounding, object counting (VideoSSR) and arrow of
time."""

from tasks.discovery import export_submodules

__all__ = export_submodules(__name__, __path__, globals())  # a new task file needs no edit here
