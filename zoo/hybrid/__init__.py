"""Supervised+RL hybrids as GRPO ``guidance`` (`zoo.grpo.guidance.Guidance`): SRFT and LUFFY put a
demonstration in every group, Entropulse alternates RL with SFT on the policy's own successes; pure
math in `functional`."""

from zoo.hybrid.entropulse import Entropulse
from zoo.hybrid.expert import LUFFY, SRFT

__all__ = ["LUFFY", "SRFT", "Entropulse"]
