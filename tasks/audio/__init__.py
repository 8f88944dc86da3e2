"""Audio pretext tasks (jigsaw, anomaly grounding, speed) and labelled audio multiple choice (R1-AQA)."""

from tasks.audio.anomaly_grounding import AudioAnomalyGrounding
from tasks.audio.common import Audio, AudioQA
from tasks.audio.jigsaw import AudioJigsaw
from tasks.audio.mcq import AudioMCQ
from tasks.audio.speed import AudioSpeed

__all__ = ["Audio", "AudioAnomalyGrounding", "AudioJigsaw", "AudioMCQ", "AudioQA", "AudioSpeed"]
