"""Raw-media sources: indexable collections of items of one modality that pretext tasks turn into examples."""

from datamodules.sources.base import Source
from datamodules.sources.image_folder import ImageFolder
from datamodules.sources.rgbd_folder import RGBDFolder
from datamodules.sources.synthetic import SyntheticScenes
from datamodules.sources.synthetic_rgbd import SyntheticRGBD
from datamodules.sources.synthetic_video import SyntheticVideos
from datamodules.sources.video_folder import VideoFolder

__all__ = ["ImageFolder", "RGBDFolder", "Source", "SyntheticRGBD", "SyntheticScenes", "SyntheticVideos",
           "VideoFolder"]
