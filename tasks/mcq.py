"""Labelled multiple choice over images, videos or audio (CV-Bench, MMBench, MMAU, R1-AQA), checked
strictly.

The answer is the option's letter, or its text exactly (R1-AQA rewards the option text inside
``<answer>``); anything that is not one of the options is invalid and earns neither accuracy nor
format reward.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from PIL import Image

from tasks import answers
from tasks.audio.common import Audio, audio_part, waveform_of
from tasks.base import Example, SkipItem, Task, Video
from tasks.video.common import even_frames, video_part


@dataclass
class Question:
    """A labelled multiple-choice question about zero or more media items: what `MultipleChoice`
    consumes.

    Attributes:
        question: The question text (with any hint or context the benchmark gives).
        choices: The options, as text.
        answer: The correct option, one of ``choices``.
        media: PIL images, `tasks.Video` clips and `tasks.Audio` recordings, shown in this order
            before the question.
        name: Where it came from (a file and row), for logs.
        rewrite: An analogical rewording of ``question`` with the same answer, for `tasks.CoReward`
            (``rewrite: item``); empty when the source gives none.
    """

    question: str
    choices: list[str]
    answer: str
    media: list[Any] = field(default_factory=list)
    name: str = ""
    rewrite: str = ""

    def rewritten(self) -> Question | None:
        """The same question in its rewording (same options, answer and media), or None without
        one."""
        return replace(self, question=self.rewrite, rewrite="") if self.rewrite.strip() else None


def media_part(item: Any) -> dict:
    """The content part showing one media item: a PIL image, a `tasks.Video` (an even number of
    frames, >= 2) or a `tasks.Audio`; SkipItem for anything else or an unusable clip."""
    if isinstance(item, Image.Image):
        return {"type": "image", "image": item.convert("RGB")}
    if isinstance(item, Video):
        return video_part(even_frames(item, 2), item.fps)
    if isinstance(item, Audio):
        return audio_part(waveform_of(item), item.sampling_rate)
    raise SkipItem(f"cannot show a {type(item).__name__} in a prompt")


class MultipleChoice(Task):
    """Ask a labelled multiple-choice question about the item's media and check the chosen option
    strictly.

    An answer that is not one of the options (in the form ``labels`` asks for) is invalid: it earns
    neither accuracy nor format reward. Items with fewer than two distinct options, or whose answer
    is not one of them, are skipped.

    Args:
        labels: ``"letters"``: options listed as ``A) ...`` lines, the answer is a letter (any case,
            ``(B)`` and ``B.`` accepted, unless ``strict_letters``). ``"text"``: options listed as a
            Python-style list, the answer is the option's text exactly (R1-AQA).
        shuffle_choices: Present the options in a random order (from the example's rng) instead of
            as stored (benchmarks keep the stored order: ``false``).
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "mcq"
    modality = "mcq"
    parts = ("accuracy",)
    levels = {}  # labelled data: no pretext source makes its items

    def __init__(self, labels: Literal["letters", "text"] = "letters", shuffle_choices: bool = True, **kwargs):
        super().__init__(**kwargs)
        if labels not in ("letters", "text"):
            raise ValueError(f"labels must be 'letters' or 'text', got {labels!r}")
        self.labels = labels
        self.shuffle_choices = shuffle_choices

    def media(self, item: Question) -> list[dict]:
        """The content parts shown before the question."""
        return [media_part(m) for m in item.media]

    def make_example(self, item: Question, rng: random.Random) -> Example:
        # stripped: an extracted answer is, so an option with a space around it could never be
        # chosen by text
        choices = [str(c).strip() for c in item.choices]
        answer = str(item.answer).strip()
        if len(choices) < 2 or len(set(choices)) != len(choices) or answer not in choices:
            raise SkipItem(
                f"{_name(item)}: need >= 2 distinct choices containing the answer, got {choices} with "
                f"answer {item.answer!r}"
            )
        if self.labels == "letters" and len(choices) > 26:
            raise SkipItem(f"{_name(item)}: {len(choices)} choices, more than letters A-Z")
        media = self.media(item)
        if self.shuffle_choices:
            rng.shuffle(choices)
        question = f"{item.question.strip()}\n{self.listing(choices)}"
        return Example(self.user_message(media, question), answer, self.name, {"choices": choices})

    def listing(self, choices: list[str]) -> str:
        """How the options are shown after the question."""
        if self.labels == "letters":
            return answers.choice_prompt(choices)
        return f"Options: {choices}. Answer with the text of one option, exactly as written."

    def reask(self, example: Example, rng: random.Random) -> Example:
        """The same question with its options in another order (drawn from ``rng``): the second
        asking of `tasks.ACRE`. The answer (an option's text) is unchanged; its letter moves."""
        choices = list(example.meta["choices"])
        order = choices
        while order == choices:  # >= 2 distinct options: another order always exists
            order = rng.sample(choices, len(choices))
        old, new = self.listing(choices), self.listing(order)
        messages = [
            {**m, "content": [_relisted(part, old, new) for part in m["content"]]}
            if isinstance(m["content"], list)
            else m
            for m in example.messages
        ]
        return replace(example, messages=messages, meta={**example.meta, "choices": order})

    def answer_text(self, example: Example) -> str:
        if self.labels == "letters":
            return answers.letter(example.meta["choices"].index(example.answer))
        return example.answer

    def parse_answer(self, example: Example, answer: str) -> str | None:
        """The text of the option chosen (by letter or by text), None when it is no option: the
        same ballot for the same option whatever its letter in an asking."""
        choices = example.meta["choices"]
        chosen = answers.parse_letter(answer, choices, self.strict_letters) if self.labels == "letters" else answer
        return chosen if chosen in choices else None

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        chosen = self.parse_answer(example, answer)
        if chosen is None:
            return None
        return {"accuracy": float(chosen == example.answer)}


def _relisted(part: dict, old: str, new: str) -> dict:
    """A content part with its option listing ``old`` replaced by ``new`` (text parts only)."""
    if part.get("type") != "text" or old not in part["text"]:
        return part
    return {**part, "text": part["text"].replace(old, new)}


def _name(item: Any) -> str:
    return getattr(item, "name", "") or getattr(getattr(item, "audio", None), "name", "") or type(item).__name__
