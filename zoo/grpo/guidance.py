"""The seam through which a supervised+RL hybrid (`zoo.hybrid`: SRFT, LUFFY, Entropulse) changes a
GRPO step.

`Guidance` does nothing: a GRPO strategy without ``guidance`` trains exactly as before. A hybrid
overrides the hooks it needs; the strategy calls each once at a fixed point of its step (named in
each hook's docstring).
"""

from __future__ import annotations

import torch
from torch import Tensor


class Guidance:
    """What a hybrid may change in a GRPO step; every hook here leaves the step as it is."""

    def attach(self, strategy) -> None:
        """Called once by the strategy's ``__init__``: refuse settings the hybrid cannot train
        with."""

    def data_needs(self) -> list:
        """What the hybrid calls on the data module besides rewards (`zoo.data.Need`), checked in
        ``setup``."""
        return []

    def sampled(self, num_generations: int) -> int:
        """Completions to sample per prompt, of the group's G (the rest are added by `extend`)."""
        return num_generations

    def step(self, strategy, batch: list, batch_idx: int) -> dict | None:
        """Called first in each training step: the step's output when the hybrid trains this step
        itself (a supervised phase), None to let GRPO train it."""
        return None

    def extend(self, strategy, rollout, rewards: list, means) -> tuple:
        """Called after the sampled completions are verified (and logged as ``train/reward``): the
        rollout and rewards the step trains on, G rows per prompt. ``means`` takes the step's
        metrics."""
        return rollout, rewards

    def prepare(self, strategy, parts: list) -> None:
        """Called once per optimizer window, after its parts (rows, masks, advantages, divisors) are
        built."""

    def adjust(self, strategy, part, rows: Tensor, out: dict, per_token: Tensor, means) -> tuple[Tensor, Tensor]:
        """The per-token surrogate of ``rows`` of ``part`` (``[n, L]``, to be aggregated as the loss
        type says) and a loss term of its own added after aggregation (a scalar). ``means`` is None
        on padding passes."""
        return per_token, torch.zeros((), device=per_token.device)
