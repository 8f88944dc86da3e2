"""Progress inside a long step, so that a slow one (long completions on a CPU) shows it is moving
and a fast one prints nothing: `SamplingProgress`, a ``[zoo]`` line every few seconds of a long
``generate`` with the tokens sampled so far; `Every`, the clock it and the training passes
(`zoo.training.ManualStep.backward_pass`) report by."""

from __future__ import annotations

import time
from collections.abc import Callable

from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from transformers import LogitsProcessor


class Every:
    """Due once ``every`` seconds have passed since it began or was last due.

    Args:
        every: Seconds between reports.
        clock: Seconds, monotonic (None: ``time.monotonic``).
    """

    def __init__(self, every: float = 10.0, clock: Callable[[], float] | None = None):
        self.every = every
        self.clock = clock or time.monotonic
        self.start = self.last = self.clock()
        self.now = self.start

    def due(self) -> bool:
        """Whether a report is due now (then the next one is ``every`` seconds later)."""
        self.now = self.clock()
        if self.now - self.last < self.every:
            return False
        self.last = self.now
        return True

    @property
    def elapsed(self) -> float:
        """Seconds from the start to the last reading."""
        return self.now - self.start


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
        self.timer = Every(every, clock)

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        self.report(input_ids.shape[1] - self.prompt_length, input_ids.shape[0])  # input_ids: [N, T + sampled]
        return scores

    def report(self, sampled: int, rows: int) -> None:
        """The line, when one is due: ``sampled`` tokens so far in each of ``rows`` completions
        (`zoo.rollout.decode` calls it at every token)."""
        if self.timer.due():
            rank_zero_info(
                f"[zoo] sampling: {sampled} of at most {self.max_new_tokens} tokens in each of "
                f"{rows} completions, {self.timer.elapsed:.0f} s into this rollout"
            )
