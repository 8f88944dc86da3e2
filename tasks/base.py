"""The task contract: a task turns a raw media item into an `Example` and verifies completions for
it.

Pure Python (no Lightning, no zoo): usable from a notebook, TRL ``reward_funcs`` or verl
``compute_score``.
"""

from __future__ import annotations

import logging
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from tasks import answers, reading
from tasks.tools.base import Toolbox

log = logging.getLogger(__name__)
_LEVEL = re.compile(r"[A-Za-z0-9_.-]+")


def check_subset(name: str, values: list[str], allowed) -> None:
    """ValueError unless ``values`` is a non-empty list drawn from ``allowed`` (a task argument
    check)."""
    unknown = sorted(set(values) - set(allowed))
    if unknown or not values:
        raise ValueError(f"{name} must be a non-empty list of {sorted(allowed)}, got {unknown or values}")


def level_id(task_name: str, level: str) -> str:
    """How a task at a level is named in the benchmark, its metrics and its predictions:
    ``jigsaw@3x3``."""
    if not _LEVEL.fullmatch(level):
        raise ValueError(f"a level name is letters, digits, '_', '.' or '-', got {level!r}")
    return f"{task_name}@{level}"


class SkipItem(Exception):
    """Raised by a source or a task for an item that cannot be used (undecodable, too small, ...).

    Args:
        message: Why, naming the item.
        kind: How the data module counts the skip (``data/skipped/<source>/<kind>``): ``None`` for
            its default (``unreadable`` from a source, ``rejected_by_<task>`` from a task); a
            source's filter names its own (``too_short``), so filtered items are not counted as
            broken files.
    """

    def __init__(self, message: str = "", kind: str | None = None):
        super().__init__(message)
        self.kind = kind


@dataclass
class Video:
    """A decoded video item: what video sources yield and video tasks consume.

    Attributes:
        frames: Sampled frames, ``[T, H, W, 3]`` uint8 RGB.
        fps: Frames per second of ``frames`` (after sampling), so frame ``t`` is at ``t / fps``
            seconds.
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
        uid: A stable name of this example set by the data module (seed, split, epoch, index).
            Sampling noise is derived from it, so rollouts do not depend on how batches are split
            across ranks.
        tool_media: Media the task's tools read and the policy sees only through them (the
            full-resolution image a crop is cut from, every frame of a video: `tasks.tools`). Kept
            out of ``meta``, which rollout logs, adapters and benchmark exports write as JSON;
            never written anywhere, so an example read back from a file has none.
    """

    messages: list[dict]
    answer: Any
    task: str
    meta: dict = field(default_factory=dict)
    uid: str = ""
    tool_media: dict = field(default_factory=dict, repr=False)

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
        parts: Named components, e.g. ``{"accuracy": 0.67, "format": 1.0}``; logged per task and
            part.
    """

    total: float
    parts: dict[str, float]


class SelfReward(ABC):
    """A label-free reward: the completions of each example scored against each other instead of
    against its answer (implementations and the papers they follow: `tasks.self_rewards`). Set on a
    task as its ``self_reward`` option; the task still parses and validates every completion."""

    def check(self, task: Task) -> None:  # noqa: B027  (most self-rewards take any task)
        """Raise ValueError when ``task`` cannot be rewarded this way (called by the task's
        ``__init__``)."""

    def examples(self, task: Task, item: Any, rng: random.Random) -> list[Example]:
        """The examples ``task`` makes from ``item`` (one; a pairing reward adds the rewrite it
        compares)."""
        return [task.make_example(item, rng)]

    @abstractmethod
    def rewards(self, task: Task, examples: list[Example], completions: list[list[str]]) -> list[list[Reward]]:
        """One `Reward` per completion of each example, from the completions alone (never
        raises)."""


class Task(ABC):
    """A self-supervised pretext task: make an example from a raw item, then verify completions.

    Subclasses set ``name``, ``modality`` and ``levels``, list the reward parts they score in
    ``parts`` (``"accuracy"`` first; ``"format"`` is added here) and implement `make_example`,
    `answer_text` and `score`. One whose answers parse into values (numbers, orders, boxes) returns
    them from `parse_answer`.

    Args:
        answer_format: How the answer is marked: ``"tags"`` (``<answer>...</answer>``), ``"boxed"``
            (``\\boxed{...}``) or ``"bare"`` (the whole completion is the answer).
        think: Ask for reasoning in ``<think>...</think>`` before the answer (required by the
            parser unless ``require_think`` is False).
        format_weight: Reward added for a well-formed completion, on top of the accuracy in [0, 1].
        repetition_penalty: Subtracted from the total of a completion that repeats a long line (at
            least `reading.REPEATED_WORDS` words) more than `reading.REPEATED_RUN` times in a row,
            whatever its answer (Visual Jigsaw, arXiv 2509.25190, subtracts 0.5); the
            ``repetition`` part logs it when this is > 0.
        strict_letters: Where the answer is an option letter, only that uppercase letter alone
            counts (what a strict exact-match harness accepts); False also takes ``b``, ``(B)`` and
            ``B.``. No effect on answers that are not letters.
        answer_search: Where the answer scored for accuracy is looked for: ``"strict"`` (the whole
            completion follows the format), ``"first"`` or ``"last"`` (the first or last
            ``<answer>`` block or ``\\boxed{}`` anywhere, as the papers' ``re.search`` and
            ``extract_boxed_content`` find them; `tasks.reading`).
        format_pays: What the ``format`` part pays for: ``"valid_answer"`` (the whole completion
            follows the format and states a valid answer), ``"pattern"`` (the whole completion has
            the format's layout, whatever its answer: Visual Jigsaw, Spatial-SSRL, R1-AQA) or
            ``"found"`` (an answer block anywhere: UI-Shift).
        require_think: Whether the answer is only read after a ``<think>`` block; None: as
            ``think``. False with ``think`` asks for the block but reads answers without it (SSL4RL,
            Spatial-SSRL's accuracy); the format part still wants it.
        last_letter: Read a lettered answer as its last capital letter (a lone small letter as its
            capital) for the accuracy, as Jigsaw-R1 does; the format part still reads it as
            ``strict_letters`` says. Only for tasks whose answers are letters.
        self_reward: A label-free reward for training (`tasks.MajorityVote`, `tasks.CoReward`,
            `tasks.RegionConsistency`): the G completions of an example are rewarded by agreeing
            with each other, the answer is only read to log the true ``accuracy`` beside it. None
            rewards against the answer. Held-out examples are always scored against their answers.
    """

    name: ClassVar[str]
    modality: ClassVar[str]
    parts: ClassVar[tuple[str, ...]] = ("accuracy",)
    #: Other items of the same source each example needs (a contrastive negative): with ``partners >
    #: 0`` `datamodules.PretextDataModule` passes ``[item, *partners]`` to `make_example` instead of
    #: ``item``. A class attribute, or set per instance when options decide it
    #: (`tasks.AnomalyGrounding` with ``swap``).
    partners: int = 0
    #: Difficulty levels of the pretext benchmark (`zoo pretext-bench`), easiest first: a level name
    #: and the constructor arguments that set it (jigsaw ``3x3`` is ``rows=3, cols=3``; the others
    #: keep their defaults), as VideoSSR's VIUBench (arXiv 2511.06281) scores each task at several
    #: difficulties. ``{"default": {}}`` for a task with no natural difficulty; ``{}`` for one on
    #: labelled data that no pretext source makes. Every task states its own (a contract test
    #: checks).
    levels: ClassVar[dict[str, dict]]
    #: The tools a policy may call before it answers and its turn limits (`tasks.tools.Toolbox`);
    #: None: one turn, the answer. A task with tools verifies the whole transcript
    #: (`tasks.tools.transcript`).
    toolbox: Toolbox | None = None

    def __init__(
        self,
        answer_format: str = "tags",
        think: bool = False,
        format_weight: float = 0.0,
        repetition_penalty: float = 0.0,
        strict_letters: bool = False,
        self_reward: SelfReward | None = None,
        answer_search: reading.AnswerSearch = "strict",
        format_pays: reading.FormatPays = "valid_answer",
        require_think: bool | None = None,
        last_letter: bool = False,
    ):
        require = think if require_think is None else require_think
        self.reading = reading.Reading(answer_format, think, require, answer_search, format_pays, last_letter)
        self.answer_search, self.format_pays, self.last_letter = answer_search, format_pays, last_letter
        self.require_think = require_think  # None kept: a copy with another ``think`` follows it
        if format_weight < 0 or repetition_penalty < 0:
            raise ValueError(
                f"format_weight and repetition_penalty must be >= 0, got {format_weight}, {repetition_penalty}"
            )
        self.answer_format = answer_format
        self.think = think
        self.format_weight = format_weight
        self.repetition_penalty = repetition_penalty
        self.strict_letters = strict_letters
        self.self_reward = self_reward
        if self_reward is not None:
            self_reward.check(self)

    @classmethod
    def level_arguments(cls, level: str, **common) -> dict:
        """The constructor arguments at ``level`` (see `levels`), after ``common`` ones (answer
        format options)."""
        if not cls.levels:
            raise KeyError(f"{cls.__name__} has no difficulty levels (it needs labelled data)")
        if level not in cls.levels:
            raise KeyError(f"{cls.__name__} has no level {level!r}; its levels: {list(cls.levels)}")
        return {**common, **cls.levels[level]}

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
        """Score a non-empty extracted answer: one value in [0, 1] per name in ``parts``, or None
        when the answer is not a valid answer of this task at all (it then earns no format reward
        either)."""

    def make_examples(self, item: Any, rng: random.Random) -> list[Example]:
        """The examples one item makes, trained on in the same batch: `make_example`'s, plus the
        rewrite a pairing ``self_reward`` asks for (`tasks.CoReward`)."""
        if self.self_reward is None:
            return [self.make_example(item, rng)]
        return self.self_reward.examples(self, item, rng)

    def verify_group(self, examples: list[Example], completions: list[list[str]]) -> list[list[Reward]]:
        """Rewards of the completions of each example (``completions[b]`` are example ``b``'s G
        samples): `verify` for each, or the ``self_reward``, which compares them with each other.
        Never raises for a completion (`verify` does not)."""
        if len(examples) != len(completions):
            raise ValueError(f"{len(examples)} examples but {len(completions)} groups of completions")
        if self.self_reward is not None:
            return self.self_reward.rewards(self, examples, completions)
        pairs = zip(examples, completions, strict=True)
        return [[self.verify(example, text) for text in group] for example, group in pairs]

    def canonical_answer(self, example: Example, completion: str) -> Hashable | None:
        """The answer ``completion`` states, in a canonical form: equal for two completions exactly
        when the task reads the same answer in them (`tasks.Rotation` reads ``90``, ``90 degrees``
        and ``90°`` as one angle), so self-rewards count answers, not spellings (their ballots).
        None when it states no valid answer (it then earns no format reward). Never raises."""
        answer = self.extract_answer(completion)
        if answer is None:
            return None
        try:
            return self.parse_answer(example, answer)
        except Exception:  # like a scoring error: no ballot, never a dead training run
            log.exception("%s.parse_answer failed on answer %r", type(self).__name__, answer[:200])
            return None

    def extract_answer(self, completion: str) -> str | None:
        """The answer of ``completion`` that its accuracy is scored on (``answer_search``,
        ``require_think``, ``last_letter``); None when it states none."""
        return self.reading.answer(completion)

    def parse_answer(self, example: Example, answer: str) -> Hashable | None:
        """The value of a non-empty extracted answer as `canonical_answer` gives it; None when
        `score` finds no valid answer in it. By default its `answers.canonical_text` (what is left
        of a letter or a word); a task that parses answers into numbers, orders or boxes returns
        those, read by the same parser as its `score`."""
        return None if self.score(example, answer) is None else answers.canonical_text(answer)

    def render_answer(self, example: Example) -> str:
        """The completion a perfect policy writes."""
        return answers.wrap(self.answer_text(example), self.answer_format, self.think)

    def reasoning(self, example: Example) -> str:
        """A short templated reasoning that leads to the answer, for demonstrations
        (`demonstration`); empty when the task states none."""
        return ""

    def demonstration(self, example: Example) -> str:
        """What an expert writes for ``example`` (an SFT target): `render_answer`, with the task's
        `reasoning` inside ``<think>`` when the task asks for thinking and states one."""
        reasoning = self.reasoning(example) if self.think else ""
        if not reasoning:
            return self.render_answer(example)
        return f"<think>\n{reasoning}\n</think>\n" + answers.wrap(self.answer_text(example), self.answer_format, False)

    def check_answerable(self, example: Example) -> Example:
        """``example`` if the completion `render_answer` writes for it earns `max_reward`;
        `SkipItem` otherwise (an option text the answer format cannot carry, a target no valid
        answer reaches): no completion could get such an example right, so it would only teach
        noise."""
        earned = self.verify(example, self.render_answer(example)).total
        if not earned >= self.max_reward - 1e-9:
            raise SkipItem(
                f"unanswerable: the right answer {self.answer_text(example)[:80]!r} earns {earned:.3g} "
                f"of {self.max_reward:.3g}"
            )
        return example

    def instruction(self) -> str:
        """The sentence appended to each prompt that states the expected answer format."""
        return answers.instruction(self.answer_format, self.think)

    def user_message(self, media: list[dict], question: str) -> list[dict]:
        """A one-turn conversation: the media parts, then the question and the format
        instruction."""
        text = f"{question}\n{self.instruction()}"
        return [{"role": "user", "content": [*media, {"type": "text", "text": text}]}]

    def verify(self, example: Example, completion: str) -> Reward:
        """Reward a completion. ``format`` is 1 when the completion follows the answer format and
        states a valid answer (right or wrong), or as ``format_pays`` says. Never raises: a scoring
        error is logged and earns nothing."""
        scores = self._scores(example, self.extract_answer(completion))
        parts = dict.fromkeys(self.parts, 0.0) | (scores or {})
        parts["format"] = float(self._formatted(example, completion, scores))
        total = self.total(parts)
        if self.repetition_penalty > 0:
            parts["repetition"] = float(reading.repeats_lines(completion))
            total -= self.repetition_penalty * parts["repetition"]
        return Reward(total=total, parts=parts)

    def _scores(self, example: Example, answer: str | None) -> dict[str, float] | None:
        """`score` of an extracted answer; None for no answer, an invalid one or a scoring error."""
        if answer is None:
            return None
        try:
            return self.score(example, answer)
        except Exception:  # a verifier bug must not kill a training run
            log.exception("%s.score failed on answer %r; scored 0", type(self).__name__, answer[:200])
            return None

    def _formatted(self, example: Example, completion: str, scores: dict[str, float] | None) -> bool:
        """Whether the completion earns the ``format`` part (``scores``: its accuracy reading's)."""
        if self.reading.format_pays != "valid_answer":
            return self.reading.shaped(completion)
        if self.reading.strict:  # the accuracy read the answer as the format does
            return scores is not None
        return self._scores(example, self.reading.strict_answer(completion)) is not None

    def total(self, parts: dict[str, float]) -> float:
        """The reward of scored parts before any repetition penalty: accuracy plus the weighted
        format."""
        return parts["accuracy"] + self.format_weight * parts["format"]
