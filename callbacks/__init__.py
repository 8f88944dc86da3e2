"""Callbacks observe training and export results; removing one never changes what is learned."""

from callbacks.curves import TrainingCurves
from callbacks.metrics import GRPOMetrics
from callbacks.rollouts import RolloutSampler

__all__ = ["GRPOMetrics", "RolloutSampler", "TrainingCurves"]
