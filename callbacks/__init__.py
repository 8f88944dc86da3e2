"""Callbacks observe training and export results; removing one never changes what is learned (except
`Curriculum`, which drives the data module's curriculum stages by design)."""

from callbacks.checkpoints import Checkpoints
from callbacks.curriculum import Curriculum, Stage
from callbacks.curves import TrainingCurves
from callbacks.metrics import GRPOMetrics
from callbacks.predictions import Predictions
from callbacks.progress import StepProgress
from callbacks.rollouts import RolloutSampler

__all__ = ["Checkpoints", "Curriculum", "GRPOMetrics", "Predictions", "RolloutSampler", "Stage", "StepProgress",
           "TrainingCurves"]
