"""Callbacks observe training and export results; removing one never changes what is learned (except
`Curriculum` and `DifficultySampler`, which drive the data module's stages and item weights by design)."""

from callbacks.curriculum import Curriculum, Stage
from callbacks.curves import TrainingCurves
from callbacks.difficulty import DifficultySampler
from callbacks.metrics import GRPOMetrics
from callbacks.predictions import Predictions
from callbacks.rollouts import RolloutSampler

__all__ = ["Curriculum", "DifficultySampler", "GRPOMetrics", "Predictions", "RolloutSampler", "Stage", "TrainingCurves"]
