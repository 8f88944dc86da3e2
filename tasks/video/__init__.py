"""Video pretext tasks: temporal jigsaw, anomaly grounding, object counting (VideoSSR) and arrow of time."""

from tasks.video.anomaly_grounding import AnomalyGrounding
from tasks.video.arrow_of_time import ArrowOfTime
from tasks.video.object_counting import ObjectCounting
from tasks.video.temporal_jigsaw import TemporalJigsaw

__all__ = ["AnomalyGrounding", "ArrowOfTime", "ObjectCounting", "TemporalJigsaw"]
