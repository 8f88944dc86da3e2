"""GRPO: pure loss math (`functional`), rollouts, and the Lightning strategies."""

from zoo.grpo.rollout import Rollout
from zoo.grpo.strategy import GRPODDPStrategy, GRPOFSDPStrategy, GRPOMixin, GRPOStrategy

__all__ = ["GRPODDPStrategy", "GRPOFSDPStrategy", "GRPOMixin", "GRPOStrategy", "Rollout"]
