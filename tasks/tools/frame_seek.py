"""FrameSeek: show the frames around a time of a video at a higher rate than the prompt samples
them, the video counterpart of a crop (temporal "thinking with images": VITAL's frame-sampling tool,
arXiv 2508.04416).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from tasks.tools.base import Call, Tool, ToolError

#: ``Example.tool_media`` key of every frame of the video: a `tasks.Video` (``frames [T, H, W, 3]``
#: uint8 at ``fps``), of which the prompt shows a sample.
FULL_VIDEO = "video"

_SECONDS = re.compile(r"\s*(\d{1,6}(?:\.\d{1,6})?)\s*")


class FrameSeek(Tool):
    """``<seek>t</seek>``: ``frames`` frames of the full video centred on ``t`` seconds (from 0 to
    the video's duration), at ``fps``; a window that would run past either end is shifted inside.

    Args:
        frames: Frames per call: even (Qwen-VL merges consecutive frames into one token), >= 2.
        fps: Their rate, at most the video's (None: every frame of it, the highest rate).
    """

    name = "seek"
    syntax = "<seek>t</seek>"

    def __init__(self, frames: int = 4, fps: float | None = None):
        if frames < 2 or frames % 2:
            raise ValueError(f"frames must be even and >= 2, got {frames}")
        if fps is not None and not (math.isfinite(fps) and fps > 0):
            raise ValueError(f"fps must be a positive number or None, got {fps}")
        self.frames = frames
        self.fps = fps

    def parse(self, arguments: str) -> tuple[float]:
        match = _SECONDS.fullmatch(arguments)
        if match is None:
            raise ToolError(f"a seek is a time in seconds like 2.5, got {arguments[:80]!r}")
        return (float(match[1]),)

    def run(self, call: Call, example: Any) -> list[dict]:
        video = example.tool_media[FULL_VIDEO]
        index = self.window(call.args[0], len(video.frames), video.fps)  # [n]
        rate = video.fps / _step(index)
        frames = np.array(video.frames[index], dtype=np.uint8)  # [n, H, W, 3], a copy
        text = f"Frames from {index[0] / video.fps:.2f} s to {index[-1] / video.fps:.2f} s at {rate:.3g} fps."
        return [{"type": "video", "video": frames, "fps": float(rate)}, {"type": "text", "text": text}]

    def window(self, seconds: float, count: int, fps: float) -> np.ndarray:
        """Indices of the frames a seek to ``seconds`` shows in a video of ``count`` frames at
        ``fps``: evenly spaced, the middle one nearest ``seconds``; `ToolError` for a time past the
        video's end or a video too short for two frames."""
        if not 0 <= seconds <= count / fps:
            raise ToolError(f"{seconds} s is outside the video (0 to {count / fps:.2f} s)")
        step = 1 if self.fps is None else max(1, round(fps / self.fps))
        n = min(self.frames, ((count - 1) // step + 1) // 2 * 2)  # an even number that fits
        if n < 2:
            raise ToolError(f"the video has {count} frames, too few to show two at this rate")
        centre = min(round(seconds * fps), count - 1)
        start = min(max(centre - n // 2 * step, 0), count - 1 - (n - 1) * step)
        return np.arange(start, start + n * step, step)


def _step(index: np.ndarray) -> int:
    return int(index[1] - index[0])
