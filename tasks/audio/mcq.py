"""Labelled audio multiple choice, checked strictly: the GRPO recipe of R1-AQA (arXiv 2503.11197).

R1-AQA lists the options as text and rewards the exact option text inside ``<answer>``, plus a format reward;
lettered options are offered too.
"""

from __future__ import annotations

import random
from typing import Literal

from tasks import answers
from tasks.audio.common import AudioQA, audio_part, waveform_of
from tasks.base import Example, SkipItem, Task


class AudioMCQ(Task):
    """Ask a labelled question about a recording and check the chosen option strictly.

    An answer that is not one of the options (in the form ``labels`` asks for) is invalid: it earns neither
    accuracy nor format reward.

    Args:
        labels: ``"letters"``: options listed as ``A) ...`` lines, the answer is a letter (any case).
            ``"text"``: options listed as a Python-style list, the answer is the option's text exactly (R1-AQA).
        shuffle_choices: Present the options in a random order (from the example's rng) instead of as stored.
        **kwargs: Answer format options, see `tasks.Task` (R1-AQA: ``tags`` with ``format_weight`` 1).
    """

    name = "audio_mcq"
    modality = "audio_qa"
    parts = ("accuracy",)

    def __init__(self, labels: Literal["letters", "text"] = "letters", shuffle_choices: bool = True, **kwargs):
        super().__init__(**kwargs)
        if labels not in ("letters", "text"):
            raise ValueError(f"labels must be 'letters' or 'text', got {labels!r}")
        self.labels, self.shuffle_choices = labels, shuffle_choices

    def make_example(self, item: AudioQA, rng: random.Random) -> Example:
        wave = waveform_of(item.audio)
        choices = [str(c) for c in item.choices]
        if len(choices) < 2 or len(set(choices)) != len(choices) or item.answer not in choices:
            raise SkipItem(f"{item.audio.name or 'audio'}: need >= 2 distinct choices containing the answer, got "
                           f"{choices} with answer {item.answer!r}")
        if self.shuffle_choices:
            rng.shuffle(choices)
        if self.labels == "letters":
            listing = answers.choice_prompt(choices)
        else:
            listing = f"Options: {choices}. Answer with the text of one option, exactly as written."
        question = f"{item.question.strip()}\n{listing}"
        media = [audio_part(wave, item.audio.sampling_rate)]
        return Example(self.user_message(media, question), item.answer, self.name, {"choices": choices})

    def answer_text(self, example: Example) -> str:
        if self.labels == "letters":
            return answers.letter(example.meta["choices"].index(example.answer))
        return example.answer

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        choices = example.meta["choices"]
        chosen = answers.parse_letter(answer, choices) if self.labels == "letters" else answer
        if chosen not in choices:
            return None
        return {"accuracy": float(chosen == example.answer)}
