"""Temporal grounding (Charades-STA style): a video and a sentence in, the moment's start and end
seconds out.

The answer is ``start-end`` in seconds (``3.5-6.0``); the reward is the temporal IoU
(`tasks.answers`), ``accuracy`` is IoU >= ``threshold`` (R@1, IoU=0.5 by default).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tasks.answers import interval_scores, parse_interval
from tasks.base import Example, SkipItem, Video
from tasks.grounding import IoUTask
from tasks.video.common import even_frames, video_part


@dataclass
class Moments:
    """A video with one or more sentences and the moment each describes: what `TemporalGrounding`
    consumes (benchmark sources give one sentence per item, so each is evaluated once).

    Attributes:
        video: The whole video, its frames sampled from the start (frame ``t`` at ``t / fps``
            seconds).
        targets: ``(sentence, [start, end])`` pairs in seconds from the start of the video.
        name: Where it came from (a file and row), for logs.
    """

    video: Video
    targets: list[tuple[str, list[float]]]
    name: str = ""


class TemporalGrounding(IoUTask):
    """Show a video and one sentence (drawn by the rng among the item's targets); ask when it
    happens.

    Args:
        threshold: Temporal IoU at which an answer counts as correct (``accuracy``); the reward is
            the IoU.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "temporal_grounding"
    modality = "moments"
    levels = {}  # labelled data: no pretext source makes its items

    def make_example(self, item: Moments, rng: random.Random) -> Example:
        if not item.targets:
            raise SkipItem(f"{item.name or 'video'}: no sentence to ground")
        sentence, (start, end) = rng.choice(item.targets)
        frames = even_frames(item.video, 2)
        duration = len(frames) / item.video.fps
        question = (
            f'This video lasts {duration:.1f} seconds. When does "{sentence.strip()}" happen? Give its '
            "start and end in seconds as start-end, for example 3.5-6.0."
        )
        meta = {"sentence": sentence, "duration": duration}
        media = [video_part(frames, item.video.fps)]
        return Example(self.user_message(media, question), [float(start), float(end)], self.name, meta)

    def answer_text(self, example: Example) -> str:
        start, end = example.answer
        return f"{start:.2f}-{end:.2f}"

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        scores = interval_scores(answer, example.answer)
        return None if scores is None else self.graded(scores["accuracy"])

    def parse_answer(self, example: Example, answer: str) -> tuple[float, float] | None:
        """The interval in seconds (``1.5-3`` and ``1.50 - 3.0`` are one interval)."""
        return parse_interval(answer)
