"""GRPO only: pure loss math (`functional`), the accumulation window (`window`), dynamic sampling
(`dynamic`), the hybrid seam (`guidance`), GRPO-CARE's consistency bonus (`care`) and the Lightning
strategies (`strategy`)."""

from zoo.grpo.care import CARE
from zoo.grpo.strategy import GRPODDPStrategy, GRPOFSDPStrategy, GRPOMixin, GRPOStrategy

__all__ = ["CARE", "GRPODDPStrategy", "GRPOFSDPStrategy", "GRPOMixin", "GRPOStrategy"]
