"""The task contract: a task turns a raw media item into an `Example` and verifies completions for it.

Pure Python (no Lightning, no zoo): usable from a notebook, TRL ``reward_funcs`` or verl ``compute_score``.
"""

from __future__ import annotations

import logging
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from tasks import answers

log = logging.getLogger(__name__)


def check_subset(name: str, values: list[str], allowed) -> None:
    """ValueError unless ``values`` is a non-empty list drawn from ``allowed`` (a task argument check)."""
    unknown = sorted(set(values) - set(allowed))
    if unknown or not values:
        raise ValueError(f"{name} must be a non-empty list of {sorted(allowed)}, got {unknown or values}")


#: A line of at least this many words, repeated more than `REPEATED_RUN` times in a row, is a degenerate loop
#: (Visual Jigsaw's ``has_excessive_repetition(min_len=7, max_run=3)``).
REPEATED_WORDS, REPEATED_RUN = 7, 3


def repeats_lines(text: str) -> bool:
    """Whether a line of at least `REPEATED_WORDS` words comes more than `REPEATED_RUN` times in a row
    (compared case-insensitively, stripped; blank lines are passed over, a shorter line breaks the run)."""
    previous, run = None, 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if len(line.split()) < REPEATED_WORDS:
            previous, run = None, 0
            continue
        key = line.lower()
        run = run + 1 if key == previous else 1
        previous = key
        if run > REPEATED_RUN:
            return True
    return False


class SkipItem(Exception):
    """Raised by a source or a task for an item that cannot be used (undecodable, too small, ...).

    Args:
        message: Why, naming the item.
        kind: How the data module counts the skip (``data/skipped/<source>/<kind>``): ``None`` for its default
            (``unreadable`` from a source, ``rejected_by_<task>`` from a task); a source's filter names its own
            (``too_short``), so filtered items are not counted as broken files.
    """

    def __init__(self, message: str = "", kind: str | None = None):
        super().__init__(message)
        self.kind = kind


@dataclass
class Video:
    """A decoded video item: what video sources yield and video tasks consume.

    Attributes:
        frames: Sampled frames, ``[T, H, W, 3]`` uint8 RGB.
        fps: Frames per second of ``frames`` (after sampling), so frame ``t`` is at ``t / fps`` seconds.
        name: Where it came from (a path, or a synthetic id), for logs.
    """

    frames: np.ndarray
    fps: float
    name: str = ""

    @property
    def duration(self) -> float:
        """Seconds covered by the sampled frames."""
        return len(self.frames) / self.fps


@dataclass
class Example:
    """One prompt with its hidden ground truth.

    Attributes:
        messages: Chat messages in HF/Qwen format with media inline in the content parts.
        answer: Ground truth, JSON-serialisable; never shown to the policy.
        task: Name of the task that made it (used in metric names and to find the verifier).
        meta: Anything the verifier needs (permutation, angle, grid size, ...).
        uid: A stable name of this example set by the data module (seed, split, epoch, index). Sampling
            noise is derived from it, so rollouts do not depend on how batches are split across ranks.
    """

    messages: list[dict]
    answer: Any
    task: str
    meta: dict = field(default_factory=dict)
    uid: str = ""

    @property
    def prompt_text(self) -> str:
        """The text parts of the messages, media shown as ``<image>``-style markers (for logs)."""
        parts = []
        for message in self.messages:
            content = message["content"]
            if isinstance(content, str):
                parts.append(content)
                continue
            for part in content:
                parts.append(part["text"] if part["type"] == "text" else f"<{part['type']}>")
        return "".join(parts)


@dataclass
class Reward:
    """Reward of one completion.

    Attributes:
        total: What GRPO optimises.
        parts: Named components, e.g. ``{"accuracy": 0.67, "format": 1.0}``; logged per task and part.
    """

    total: float
    parts: dict[str, float]


class Task(ABC):
    """A self-supervised pretext task: make an example from a raw item, then verify completions.

    Subclasses set ``name`` and ``modality``, list the reward parts they score in ``parts`` (``"accuracy"``
    first; ``"format"`` is added here) and implement `make_example`, `answer_text` and `score`.

    Args:
        answer_format: How the answer is marked: ``"tags"`` (``<answer>...</answer>``), ``"boxed"``
            (``\\boxed{...}``) or ``"bare"`` (the whole completion is the answer).
        think: Ask for reasoning in ``<think>...</think>`` before the answer (required by the parser).
        format_weight: Reward added for a well-formed completion, on top of the accuracy in [0, 1].
        repetition_penalty: Subtracted from the total of a completion that repeats a long line (at least
            `REPEATED_WORDS` words) more than `REPEATED_RUN` times in a row, whatever its answer (Visual
            Jigsaw, arXiv 2509.25190, subtracts 0.5); the ``repetition`` part logs it when this is > 0.
        strict_letters: Where the answer is an option letter, only that uppercase letter alone counts (what a
            strict exact-match harness accepts); False also takes ``b``, ``(B)`` and ``B.``. No effect on
            answers that are not letters.
    """

    name: ClassVar[str]
    modality: ClassVar[str]
    parts: ClassVar[tuple[str, ...]] = ("accuracy",)
    #: Other items of the same source each example needs (a contrastive negative): with ``partners > 0``
    #: `datamodules.PretextDataModule` passes ``[item, *partners]`` to `make_example` instead of ``item``. A
    #: class attribute, or set per instance when options decide it (`tasks.AnomalyGrounding` with ``swap``).
    partners: int = 0

    def __init__(self, answer_format: str = "tags", think: bool = False, format_weight: float = 0.0,
                 repetition_penalty: float = 0.0, strict_letters: bool = False):
        if answer_format not in answers.FORMATS:
            raise ValueError(f"answer_format must be one of {answers.FORMATS}, got {answer_format!r}")
        answers.instruction(answer_format, think)  # rejects impossible combinations (bare + think) early
        if format_weight < 0 or repetition_penalty < 0:
            raise ValueError(f"format_weight and repetition_penalty must be >= 0, got {format_weight}, "
                             f"{repetition_penalty}")
        self.answer_format = answer_format
        self.think = think
        self.format_weight = format_weight
        self.repetition_penalty = repetition_penalty
        self.strict_letters = strict_letters

    @property
    def max_reward(self) -> float:
        """The total a perfect completion earns."""
        return 1.0 + self.format_weight

    @abstractmethod
    def make_example(self, item: Any, rng: random.Random) -> Example:
        """Build an example from a raw media item; all randomness comes from ``rng``."""

    @abstractmethod
    def answer_text(self, example: Example) -> str:
        """The correct answer as the policy should write it inside the answer format."""

    @abstractmethod
    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        """Score a non-empty extracted answer: one value in [0, 1] per name in ``parts``, or None when the
        answer is not a valid answer of this task at all (it then earns no format reward either)."""

    def render_answer(self, example: Example) -> str:
        """The completion a perfect policy writes."""
        return answers.wrap(self.answer_text(example), self.answer_format, self.think)

    def check_answerable(self, example: Example) -> Example:
        """``example`` if the completion `render_answer` writes for it earns `max_reward`; `SkipItem`
        otherwise (an option text the answer format cannot carry, a target no valid answer reaches): no
        completion could get such an example right, so it would only teach noise."""
        earned = self.verify(example, self.render_answer(example)).total
        if not earned >= self.max_reward - 1e-9:
            raise SkipItem(f"unanswerable: the right answer {self.answer_text(example)[:80]!r} earns {earned:.3g} "
                           f"of {self.max_reward:.3g}")
        return example

    def instruction(self) -> str:
        """The sentence appended to each prompt that states the expected answer format."""
        return answers.instruction(self.answer_format, self.think)

    def user_message(self, media: list[dict], question: str) -> list[dict]:
        """A one-turn conversation: the media parts, then the question and the format instruction."""
        text = f"{question}\n{self.instruction()}"
        return [{"role": "user", "content": [*media, {"type": "text", "text": text}]}]

    def verify(self, example: Example, completion: str) -> Reward:
        """Reward a completion. ``format`` is 1 when the completion follows the answer format and states a
        valid answer (right or wrong). Never raises: a scoring error is logged and earns nothing."""
        answer, _ = answers.extract(completion, self.answer_format, self.think)
        scores = None
        if answer is not None:
            try:
                scores = self.score(example, answer)
            except Exception:  # a verifier bug must not kill a training run
                log.exception("%s.score failed on answer %r; scored 0", type(self).__name__, answer[:200])
        parts = dict.fromkeys(self.parts, 0.0) | (scores or {})
        parts["format"] = float(scores is not None)
        total = self.total(parts)
        if self.repetition_penalty > 0:
            parts["repetition"] = float(repeats_lines(completion))
            total -= self.repetition_penalty * parts["repetition"]
        return Reward(total=total, parts=parts)

    def total(self, parts: dict[str, float]) -> float:
        """The reward of scored parts before any repetition penalty: accuracy plus the weighted format."""
        return parts["accuracy"] + self.format_weight * parts["format"]
