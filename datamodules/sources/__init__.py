"""Raw-media sources: indexable collections of items of one modality that pretext tasks turn into examples."""

from datamodules.sources.audio_folder import AudioFolder
from datamodules.sources.audio_qa import AudioQAJsonl
from datamodules.sources.base import Source
from datamodules.sources.conversations import Conversations
from datamodules.sources.frame_pairs import FramePairs
from datamodules.sources.grounding_benchmark import GroundingBenchmark
from datamodules.sources.gui_trajectories import GUITrajectories
from datamodules.sources.image_folder import ImageFolder
from datamodules.sources.mcq_benchmark import MCQBenchmark
from datamodules.sources.moment_benchmark import MomentBenchmark
from datamodules.sources.point_cloud_folder import PointCloudFolder
from datamodules.sources.rgbd_folder import RGBDFolder
from datamodules.sources.synthetic import SyntheticScenes
from datamodules.sources.synthetic_audio import SyntheticAudio
from datamodules.sources.synthetic_grid import SyntheticGridWorld
from datamodules.sources.synthetic_gui import SyntheticGUI
from datamodules.sources.synthetic_points import SyntheticPointClouds
from datamodules.sources.synthetic_questions import SyntheticQuestions
from datamodules.sources.synthetic_rgbd import SyntheticRGBD
from datamodules.sources.synthetic_video import SyntheticVideos
from datamodules.sources.video_folder import VideoFolder

__all__ = ["AudioFolder", "AudioQAJsonl", "Conversations", "FramePairs", "GUITrajectories", "GroundingBenchmark",
           "ImageFolder", "MCQBenchmark", "MomentBenchmark", "PointCloudFolder",
           "RGBDFolder", "Source", "SyntheticAudio", "SyntheticGUI", "SyntheticGridWorld", "SyntheticPointClouds",
           "SyntheticQuestions", "SyntheticRGBD", "SyntheticScenes",
           "SyntheticVideos", "VideoFolder"]
