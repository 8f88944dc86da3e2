"""GRPO: pure loss math (`functional`), rollouts, and the Lightning strategies."""

from zoo.grpo.rollout import Rollout
from zoo.grpo.strategy import GRPODDPStrategy, GRPOMixin, GRPOStrategy

__all__ = ["GRPODDPStrategy", "GRPOMixin", "GRPOStrategy", "Rollout"]
