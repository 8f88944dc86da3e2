"""Frame handling shared by the video tasks: the frames of an item and video content parts.

Qwen-VL merges each two consecutive frames into one temporal token, so every video part has an even
number of frames (at least two).
"""

from __future__ import annotations

import numpy as np

from tasks.base import SkipItem, Video


def frames_of(item: Video) -> np.ndarray:
    """The item's frames ``[T, H, W, 3]``; SkipItem unless they are RGB uint8 with a positive frame
    rate."""
    frames = np.asarray(item.frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or not item.fps > 0:
        raise SkipItem(
            f"{item.name or 'video'}: need [T, H, W, 3] uint8 frames and fps > 0, "
            f"got {frames.shape} {frames.dtype} at fps {item.fps}"
        )
    return frames


def even_frames(item: Video, min_frames: int) -> np.ndarray:
    """The item's frames with a trailing frame dropped when their number is odd; SkipItem when fewer
    than ``min_frames`` remain."""
    frames = frames_of(item)
    usable = len(frames) - len(frames) % 2
    if usable < min_frames:
        raise SkipItem(f"{item.name or 'video'}: {len(frames)} frames, the task needs {min_frames}")
    return frames[:usable]


def video_part(frames: np.ndarray, fps: float) -> dict:
    """A ``{"type": "video"}`` content part holding a copy of ``frames`` (never a view of the source
    item)."""
    if len(frames) < 2 or len(frames) % 2:
        raise ValueError(f"a video part needs an even number of frames >= 2, got {len(frames)}")
    return {"type": "video", "video": np.array(frames, dtype=np.uint8), "fps": float(fps)}
