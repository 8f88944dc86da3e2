"""Raw-media sources: indexable collections of items of one modality that pretext tasks turn into examples."""

from datamodules.sources.audio_folder import AudioFolder
from datamodules.sources.audio_qa import AudioQAJsonl
from datamodules.sources.base import Source
from datamodules.sources.image_folder import ImageFolder
from datamodules.sources.synthetic import SyntheticScenes
from datamodules.sources.synthetic_audio import SyntheticAudio
from datamodules.sources.synthetic_video import SyntheticVideos
from datamodules.sources.video_folder import VideoFolder

__all__ = ["AudioFolder", "AudioQAJsonl", "ImageFolder", "Source", "SyntheticAudio", "SyntheticScenes",
           "SyntheticVideos", "VideoFolder"]
