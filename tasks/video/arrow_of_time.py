"""Arrow of time: play a video forward or backward and ask which.

A classic self-supervised video task (Wei et al., "Learning and Using the Arrow of Time", CVPR 2018)
and the skill AoTBench measures, on which Visual Jigsaw (arXiv 2509.25190) reports its video gains.
"""

from __future__ import annotations

import random
from typing import Literal

from tasks import answers
from tasks.base import Example, Task, Video
from tasks.video.common import even_frames, video_part

_DIRECTIONS = ("forward", "backward")
_MIN_FRAMES = 4  # two Qwen-VL temporal tokens: one token alone has no order to judge


class ArrowOfTime(Task):
    """Reverse the video with probability 1/2 and ask whether it plays forward or backward.

    Args:
        labels: ``"words"``: the answer is ``forward`` or ``backward`` (any case). ``"letters"``:
            the two are listed as options ``A) forward`` and ``B) backward`` and the answer is the
            letter.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "arrow_of_time"
    modality = "video"
    parts = ("accuracy",)
    levels = {"default": {}}

    def __init__(self, labels: Literal["words", "letters"] = "words", **kwargs):
        super().__init__(**kwargs)
        if labels not in ("words", "letters"):
            raise ValueError(f"labels must be 'words' or 'letters', got {labels!r}")
        self.labels = labels

    def make_example(self, item: Video, rng: random.Random) -> Example:
        frames = even_frames(item, _MIN_FRAMES)
        backward = rng.random() < 0.5
        media = [video_part(frames[::-1] if backward else frames, item.fps)]
        direction = _DIRECTIONS[backward]
        return Example(self.user_message(media, self._question()), direction, self.name, {"reversed": backward})

    def _question(self) -> str:
        question = "Is this video playing forward, as it was filmed, or backward, in reverse?"
        if self.labels == "letters":
            return f"{question}\n{answers.choice_prompt(_DIRECTIONS)}"
        return f"{question} Answer with one word: forward or backward."

    def answer_text(self, example: Example) -> str:
        if self.labels == "letters":
            return answers.letter(_DIRECTIONS.index(example.answer))
        return example.answer

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        if self.labels == "letters":
            direction = answers.parse_letter(answer, _DIRECTIONS, self.strict_letters)
        else:
            direction = answers.parse_choice(answer, _DIRECTIONS)
        if direction is None:
            return None
        return {"accuracy": float(direction == example.answer)}
