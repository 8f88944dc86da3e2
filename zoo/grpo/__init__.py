"""GRPO only: pure loss math (`functional`), the accumulation window (`window`), dynamic sampling
(`dynamic`), the hybrid seam (`guidance`) and the Lightning strategies (`strategy`)."""

from zoo.grpo.strategy import GRPODDPStrategy, GRPOFSDPStrategy, GRPOMixin, GRPOStrategy

__all__ = ["GRPODDPStrategy", "GRPOFSDPStrategy", "GRPOMixin", "GRPOStrategy"]
