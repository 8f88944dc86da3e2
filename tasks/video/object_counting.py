"""Object counting: draw shapes onto a few frames of a video and ask how many of each kind appeared.

Follows VideoSSR (arXiv 2511.06281): filled circles, squares and triangles of random colour, size
and rotation on 1-3 frames per kind, 1-3 per frame; the reward is the mean relative count error over
the kinds. The answer is read strictly (the counts and commas only) or, as VideoSSR's reward reads
it, as every number in the answer.
"""

from __future__ import annotations

import random
import re
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw

from tasks.base import Example, SkipItem, Task, Video
from tasks.video.common import even_frames, video_part

_SIDES = {"circle": 0, "triangle": 3, "square": 4, "pentagon": 5, "hexagon": 6}
_COUNTS = re.compile(r"\s*\d{1,6}(?:\s*,\s*\d{1,6})*\s*")
_NUMBER = re.compile(r"\d+")
_MAX_DIGITS = 9  # a longer run of digits is no count (and int() refuses runs of thousands of digits)
_MIN_SIDE = 16  # pixels: below this the smallest shapes are a few pixels wide
_TRIES = 50  # random positions tried per shape before the frame is taken as full
_GAP = 4  # pixels between bounding circles: rasterised edges reach ~1 px out, and touching shapes merge


class ObjectCounting(Task):
    """Draw filled shapes onto a few frames and ask how many shapes of each kind the video shows.

    Args:
        kinds: The shapes drawn and counted, in the order the answer lists them; from ``circle``,
            ``square``, ``triangle``, ``pentagon`` and ``hexagon``.
        max_frames_per_kind: Each kind is drawn on 1 to this many frames (fewer when the video is
            short).
        max_per_frame: Each of those frames gets 1 to this many shapes of that kind, as many as fit
            without overlapping.
        min_gap: Frames holding the same kind are at least this many frames apart, less when
            ``max_frames_per_kind`` such frames would not fit in the video. No frame holds two
            kinds.
        parse: How the answer is read. ``"strict"``: only the counts, separated by commas
            (``3,2,3``). ``"numbers"``: every number anywhere in the answer, in order, as VideoSSR's
            reward reads it (``The answer is 3, 2, 3`` counts; so does ``-3 2 3``); either way there
            must be one per kind.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "object_counting"
    modality = "video"
    parts = ("accuracy", "exact")
    # VIUBench's hard counting is up to 4 frames and 4 shapes
    levels = {
        "easy": {"max_frames_per_kind": 1, "max_per_frame": 2},
        "medium": {},
        "hard": {"max_frames_per_kind": 4, "max_per_frame": 4},
    }

    def __init__(
        self,
        kinds: list[str] = ["circle", "square", "triangle"],  # noqa: B006  (never mutated)
        max_frames_per_kind: int = 3,
        max_per_frame: int = 3,
        min_gap: int = 8,
        parse: Literal["strict", "numbers"] = "strict",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not kinds or len(set(kinds)) != len(kinds) or not set(kinds) <= set(_SIDES):
            raise ValueError(f"kinds must be distinct names from {sorted(_SIDES)}, got {kinds}")
        for arg, value in [
            ("max_frames_per_kind", max_frames_per_kind),
            ("max_per_frame", max_per_frame),
            ("min_gap", min_gap),
        ]:
            if value < 1:
                raise ValueError(f"{arg} must be >= 1, got {value}")
        if parse not in ("strict", "numbers"):
            raise ValueError(f"parse must be 'strict' or 'numbers', got {parse!r}")
        self.parse = parse
        self.kinds = list(kinds)
        self.max_frames_per_kind = max_frames_per_kind
        self.max_per_frame = max_per_frame
        self.min_gap = min_gap

    def make_example(self, item: Video, rng: random.Random) -> Example:
        frames = even_frames(item, len(self.kinds))
        if min(frames.shape[1:3]) < _MIN_SIDE:
            raise SkipItem(f"{item.name or 'video'}: {frames.shape[2]}x{frames.shape[1]} frames, below {_MIN_SIDE}")
        gap = max(1, min(self.min_gap, len(frames) // self.max_frames_per_kind))
        drawn = frames.copy()
        free = list(range(len(frames)))
        counts = []
        where = {}
        for i, kind in enumerate(self.kinds):
            later = len(self.kinds) - 1 - i  # each kind still to come keeps a free frame
            chosen = _pick(free, min(rng.randint(1, self.max_frames_per_kind), len(free) - later), gap, rng)
            free = [t for t in free if t not in chosen]
            count = 0
            for t in chosen:
                drawn[t], placed = _draw(drawn[t], kind, rng.randint(1, self.max_per_frame), rng)
                count += placed
            counts.append(count)
            where[kind] = chosen
        meta = {"kinds": self.kinds, "frames": where, "min_gap": gap}
        media = [video_part(drawn, item.fps)]
        return Example(self.user_message(media, self._question()), counts, self.name, meta)

    def _question(self) -> str:
        names = [f"{kind}s" for kind in self.kinds]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        example = ",".join(str(n) for n in [3, 1, 4, 2, 5][: len(names)])
        return (
            f"Filled shapes have been drawn over some frames of this video. Count the {listed} in the whole "
            "video. The shapes can have any colour, size and rotation; each one is shown on a single frame, and "
            f"a frame can hold several. Answer with {len(names)} number{'s' * (len(names) > 1)} separated by "
            f"commas: the number of {listed}, in that order (for example {example})."
        )

    def answer_text(self, example: Example) -> str:
        return ",".join(str(n) for n in example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        pred = self.parse_answer(example, answer)
        if pred is None:
            return None
        # every kind is drawn at least once, so the truth is never 0
        per_kind = [max(0.0, 1.0 - abs(p - t) / t) for p, t in zip(pred, example.answer, strict=True)]
        exact = float(pred == tuple(example.answer))
        return {"accuracy": sum(per_kind) / len(per_kind), "exact": exact}

    def parse_answer(self, example: Example, answer: str) -> tuple[int, ...] | None:
        """The counts, one per kind (``3``, ``03`` and ``３`` are one count)."""
        pred = self._counts(answer)
        return None if pred is None or len(pred) != len(example.answer) else tuple(pred)

    def _counts(self, answer: str) -> list[int] | None:
        """The counts an answer states, as ``parse`` reads it; None when it is not read as counts at
        all."""
        if self.parse == "strict":
            return [int(value) for value in answer.split(",")] if _COUNTS.fullmatch(answer) else None
        numbers = _NUMBER.findall(answer)
        return None if any(len(n) > _MAX_DIGITS for n in numbers) else [int(n) for n in numbers]


def _pick(free: list[int], n: int, gap: int, rng: random.Random) -> list[int]:
    """Up to ``n`` (at least one) of the ``free`` frames, pairwise at least ``gap`` apart,
    sorted."""
    candidates = list(free)
    rng.shuffle(candidates)
    chosen: list[int] = []
    for t in candidates:
        if len(chosen) < n and all(abs(t - c) >= gap for c in chosen):
            chosen.append(t)
    return sorted(chosen)


def _draw(frame: np.ndarray, kind: str, n: int, rng: random.Random) -> tuple[np.ndarray, int]:
    """``frame`` with up to ``n`` non-overlapping shapes of ``kind`` in its central 70%, and how
    many fit.

    A shape's size is the diameter of its bounding circle, 20-40% of the frame's shorter side."""
    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    placed: list[tuple[float, float, float]] = []
    for _ in range(n):
        radius = rng.uniform(0.1, 0.2) * min(image.size)
        spot = _place(placed, radius, *image.size, rng)
        if spot is None:
            break
        colour = tuple(rng.randint(50, 255) for _ in range(3))
        x, y = spot
        if _SIDES[kind] == 0:
            draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=colour)
        else:
            draw.regular_polygon((x, y, radius), _SIDES[kind], rotation=rng.uniform(0, 360), fill=colour)
        placed.append((x, y, radius))
    return np.asarray(image), len(placed)


def _place(placed: list, radius: float, width: int, height: int, rng: random.Random) -> tuple[float, float] | None:
    """A centre keeping the shape inside the central 70% of the frame and clear of the shapes
    placed."""
    for _ in range(_TRIES):
        x = rng.uniform(0.15 * width + radius, 0.85 * width - radius)
        y = rng.uniform(0.15 * height + radius, 0.85 * height - radius)
        if all((x - px) ** 2 + (y - py) ** 2 >= (radius + pr + _GAP) ** 2 for px, py, pr in placed):
            return x, y
    return None
