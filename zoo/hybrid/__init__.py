"""Supervised+RL hybrids as GRPO ``guidance`` (`zoo.grpo.guidance.Guidance`): SRFT and LUFFY put a
demonstration in every group, CHORD adds a scheduled SFT loss on demonstrations kept out of the
groups, Entropulse alternates RL with SFT on the policy's own successes; pure math in
`functional`."""

from zoo.hybrid.chord import CHORD
from zoo.hybrid.entropulse import Entropulse
from zoo.hybrid.expert import LUFFY, SRFT

__all__ = ["CHORD", "LUFFY", "SRFT", "Entropulse"]
