"""The sampling layer: the engine interface (`engine`), `Rollout` (`rollout`), seeded noise
(`seeds`), log-prob math (`logprobs`) and one file per engine (`hf`: Hugging Face ``generate``). It
knows nothing of GRPO."""

from zoo.rollout.engine import Prompts, RolloutEngine, Sampling
from zoo.rollout.hf import HFEngine
from zoo.rollout.rollout import Rollout

__all__ = ["HFEngine", "Prompts", "Rollout", "RolloutEngine", "Sampling"]
