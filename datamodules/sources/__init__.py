"""Raw-media sources: indexable collections of items of one modality that pretext tasks turn into examples."""

from datamodules.sources.base import Source
from datamodules.sources.image_folder import ImageFolder
from datamodules.sources.point_cloud_folder import PointCloudFolder
from datamodules.sources.synthetic import SyntheticScenes
from datamodules.sources.synthetic_points import SyntheticPointClouds
from datamodules.sources.synthetic_video import SyntheticVideos
from datamodules.sources.video_folder import VideoFolder

__all__ = ["ImageFolder", "PointCloudFolder", "Source", "SyntheticPointClouds", "SyntheticScenes", "SyntheticVideos",
           "VideoFolder"]
