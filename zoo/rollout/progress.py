"""`SamplingProgress`: a ``[zoo]`` line every few seconds of a long ``generate``, with the tokens
sampled so far, so that a slow step (long completions on a CPU) shows it is moving; a fast one
prints nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from transformers import LogitsProcessor


class SamplingProgress(LogitsProcessor):
    """A logits processor that changes nothing and, once ``every`` seconds of a ``generate`` call
    have passed since it began or last reported, reports the completion tokens sampled so far.

    Args:
        prompt_length: T, the prompt tokens in front of every row of ``input_ids``.
        max_new_tokens: L, the completion length the call may reach.
        every: Seconds between reports.
        clock: Seconds, monotonic (None: ``time.monotonic``).
    """

    def __init__(
        self, prompt_length: int, max_new_tokens: int, every: float = 10.0, clock: Callable[[], float] | None = None
    ):
        self.prompt_length = prompt_length
        self.max_new_tokens = max_new_tokens
        self.every = every
        self.clock = clock or time.monotonic
        self.start = self.last = self.clock()

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            sampled = input_ids.shape[1] - self.prompt_length  # tokens per row so far, [N, T + sampled]
            rank_zero_info(
                f"[zoo] sampling: {sampled} of at most {self.max_new_tokens} tokens in each of "
                f"{input_ids.shape[0]} completions, {now - self.start:.0f} s into this rollout"
            )
        return scores
