"""Brief event: name the colour of a square that flashes between two of the frames a prompt samples,
which only a seek at the full frame rate shows; the frame-seek tool's task (temporal "thinking with
images"), checkable by construction.

The flash lasts fewer frames than the prompt's stride and never falls on a shown frame, so the shown
videos of two colours are byte-identical; a grey dot left where it flashed tells when and where.
"""

from __future__ import annotations

import random

import numpy as np

from tasks import answers
from tasks.base import Example, SkipItem, Video, check_subset
from tasks.tool_use import ToolUseTask, times
from tasks.tools.base import Call, Toolbox, ToolError
from tasks.tools.frame_seek import FULL_VIDEO, FrameSeek
from tasks.video.common import frames_of, video_part

COLOURS = {"red": (255, 0, 0), "green": (0, 200, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0)}
_DOT = (128, 128, 128)


class BriefEvent(ToolUseTask):
    """Flash a coloured square on a few consecutive frames the prompt skips (it shows every
    ``stride``-th frame) and ask its colour; the policy may seek (`tasks.FrameSeek`) before it
    answers.

    Args:
        colours: The options, lettered in this order, from ``red``, ``green``, ``blue``, ``yellow``.
        stride: The prompt shows every ``stride``-th frame (a video with fewer than ``2 * stride``
            frames is skipped).
        length: Frames the flash lasts, fewer than ``stride``.
        tools: Offer the seek tool; False asks the same examples in one turn (the control arm).
        max_turns: Turns per row with the tool, the answer's included.
        seek_frames: Frames a seek returns (`tasks.FrameSeek`'s ``frames``).
        seek_fps: Their rate (`tasks.FrameSeek`'s ``fps``; None: the video's full rate).
        grounding_weight: Weight of ``grounding``: 1 when the first seek shows a frame of the flash.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "brief_event"
    modality = "video"
    parts = ("accuracy", "grounding")
    levels = {"2way": {"colours": ["red", "blue"]}, "4way": {}, "4way_1frame": {"length": 1}}

    def __init__(
        self,
        colours: list[str] = list(COLOURS),  # noqa: B006, B008  (never mutated)
        stride: int = 4,
        length: int = 2,
        tools: bool = True,
        max_turns: int = 2,
        seek_frames: int = 4,
        seek_fps: float | None = None,
        grounding_weight: float = 0.5,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.seek = FrameSeek(seek_frames, seek_fps)
        self.set_toolbox(Toolbox((self.seek,), max_turns) if tools else None, grounding_weight)
        self.tools, self.max_turns, self.seek_frames, self.seek_fps = tools, max_turns, seek_frames, seek_fps
        check_subset("colours", colours, COLOURS)
        if len(set(colours)) != len(colours) or len(colours) < 2:
            raise ValueError(f"colours must hold at least two distinct colours, got {colours}")
        if not 1 <= length < stride:
            raise ValueError(f"need 1 <= length < stride, got length {length}, stride {stride}")
        self.colours, self.stride, self.length = list(colours), stride, length

    def make_example(self, item: Video, rng: random.Random) -> Example:
        frames = frames_of(item)
        count = len(frames) // (2 * self.stride) * (2 * self.stride)  # an even number of shown frames
        if count == 0:
            raise SkipItem(f"{item.name or 'video'}: {len(frames)} frames, the task needs {2 * self.stride}")
        gap = rng.randrange(count // self.stride - 1)  # a shown frame after it shows the dot
        start = gap * self.stride + 1 + rng.randrange(self.stride - self.length)
        height, width = frames.shape[1:3]
        side = max(4, min(height, width) // 4)
        place = (rng.randrange(width - side + 1), rng.randrange(height - side + 1), side)
        colour = rng.choice(self.colours)
        full = self.render(frames[:count], start, place, colour)
        meta = {"event": [start, start + self.length], "frames": count, "fps": item.fps, "colours": self.colours}
        meta["seek"] = self._expert_time(meta)
        messages = self.user_message([video_part(full[:: self.stride], item.fps / self.stride)], self._question(meta))
        return Example(messages, colour, self.name, meta, tool_media={FULL_VIDEO: Video(full, item.fps, item.name)})

    def render(self, frames: np.ndarray, start: int, place: tuple[int, int, int], colour: str) -> np.ndarray:
        """A copy of ``frames`` ``[T, H, W, 3]`` with the square ``(x, y, side)`` flashed from frame
        ``start`` for ``length`` frames and a grey dot at its centre from ``start`` on."""
        out = np.array(frames, dtype=np.uint8)
        x, y, side = place
        out[start : start + self.length, y : y + side, x : x + side] = COLOURS[colour]
        dot = max(2, side // 4)
        cx, cy = x + (side - dot) // 2, y + (side - dot) // 2
        out[start:, cy : cy + dot, cx : cx + dot] = _DOT
        return out

    def _expert_time(self, meta: dict) -> float:
        """A seek time, in seconds, whose frames show the flash."""
        for frame in range(*meta["event"]):
            seconds = round(frame / meta["fps"], 2)
            if self._shows_flash(seconds, meta):
                return seconds
        raise SkipItem(f"no seek of {self.seek.frames} frames at {self.seek.fps} fps shows the flash")

    def _shows_flash(self, seconds: float, meta: dict) -> bool:
        shown = self.seek.window(seconds, meta["frames"], meta["fps"])
        return bool(np.any((shown >= meta["event"][0]) & (shown < meta["event"][1])))

    def _question(self, meta: dict) -> str:
        duration = meta["frames"] / meta["fps"]
        question = (
            f"This video lasts {duration:g} seconds, shown at {meta['fps'] / self.stride:g} fps. "
            "Between two of the shown frames a coloured square flashed for a moment; a small grey dot stays "
            "where it flashed. What colour was the square?\n" + answers.choice_prompt(self.colours)
        )
        if self.toolbox is None:
            return question
        rate = meta["fps"] if self.seek.fps is None else min(self.seek.fps, meta["fps"])
        return (
            f"{question}\nBefore answering you may look closer {times(self.toolbox.max_turns - 1)}: "
            f"reply with only {FrameSeek.syntax}, a time in seconds from 0 to {duration:g}, and you will be shown "
            f"{self.seek.frames} frames around that time at about {rate:g} fps."
        )

    def answer_text(self, example: Example) -> str:
        return answers.letter(example.meta["colours"].index(example.answer))

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        colour = answers.parse_letter(answer, example.meta["colours"], self.strict_letters)
        return None if colour is None else {"accuracy": float(colour == example.answer)}

    def expert_calls(self, example: Example) -> list[str]:
        return [f"<seek>{example.meta['seek']:.2f}</seek>"]

    def grounding(self, example: Example, calls: list[Call]) -> float | None:
        try:
            shows = [self._shows_flash(call.args[0], example.meta) for call in calls]
        except ToolError:
            return None
        return float(shows[0]) if shows else 0.0
