"""Self-supervised pretext tasks: example generators plus verifiers, usable without Lightning."""

from tasks import answers
from tasks.audio import *  # noqa: F403
from tasks.base import Example, Reward, SelfReward, SkipItem, Task, Video
from tasks.depth import *  # noqa: F403
from tasks.depth.common import RGBD
from tasks.grounding import Referring, ReferringGrounding
from tasks.gui import *  # noqa: F403
from tasks.image import *  # noqa: F403  (short class names on the command line)
from tasks.mcq import MultipleChoice, Question
from tasks.pointcloud import *  # noqa: F403
from tasks.self_rewards import CoReward, MajorityVote, RegionConsistency
from tasks.temporal_grounding import Moments, TemporalGrounding
from tasks.video import *  # noqa: F403

__all__ = ["RGBD", "CoReward", "Example", "MajorityVote", "Moments", "MultipleChoice", "Question", "Referring",
           "ReferringGrounding", "RegionConsistency", "Reward", "SelfReward", "SkipItem", "Task", "TemporalGrounding",
           "Video", "answers"]
