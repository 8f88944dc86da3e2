"""Temporal jigsaw: cut a video into clips, shuffle them, ask for their chronological order.

Follows VideoSSR (arXiv 2511.06281: clips as separate videos, footrule reward) and Visual Jigsaw
video (arXiv 2509.25190: each clip trimmed in time at both ends, then sampled), in the permutation
convention of `tasks.answers`.
"""

from __future__ import annotations

import math
import random
from typing import Literal

import numpy as np

from tasks import answers
from tasks.base import Example, SkipItem, Video
from tasks.order import OrderReward, OrderTask
from tasks.video.common import frames_of, video_part


class TemporalJigsaw(OrderTask):
    """Shuffle equal consecutive clips of a video and ask for the clip numbers in chronological
    order.

    Args:
        clips: Number of clips, at least 2. Frames left over after an equal split are dropped at the
            end.
        trim: Fraction of each clip's time left out at each of its ends (Visual Jigsaw), so that
            neighbouring clips cannot be matched by their boundary frames alone; below 0.5. A frame
            showing any of that time is left out, so any trim > 0 drops at least the first and last
            frame of each clip.
        frames_per_clip: Most frames of each clip shown, taken evenly from the central part the trim
            leaves (Visual Jigsaw: 12); even. None shows them all. Give the source more frames than
            this, so the trim cuts little more than its share of time.
        fps: Most frames shown per second of each clip's central part (Visual Jigsaw: 2), at least
            2 frames; None shows them all.
        composite: Play the shuffled clips one after the other as a single video, numbered in the
            order they play, instead of showing each clip as a separate video after its number
            (VideoSSR).
        style: ``"order"``: the answer lists the clip numbers from the earliest clip to the latest
            (``2, 3, 1``). ``"choice"``: every possible order is listed as a lettered option and the
            answer is the letter (at most 4 clips); the chosen order is graded the same way.
        reward: Which graded score is the accuracy (see `tasks.OrderTask`; VideoSSR uses
            ``footrule``).
        partial_credit: Scale of the graded accuracy of a valid but wrong order; an exact order
            always earns 1.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "temporal_jigsaw"
    modality = "video"
    levels = {f"{k}clips": {"clips": k} for k in (3, 4, 6)}  # VideoSSR trains 6 clips

    def __init__(
        self,
        clips: int = 3,
        trim: float = 0.0,
        frames_per_clip: int | None = None,
        fps: float | None = None,
        composite: bool = False,
        style: Literal["order", "choice"] = "order",
        reward: OrderReward = "footrule",
        partial_credit: float = 1.0,
        **kwargs,
    ):
        super().__init__(reward=reward, partial_credit=partial_credit, **kwargs)
        if clips < 2:
            raise ValueError(f"clips must be >= 2, got {clips}")
        if not 0 <= trim < 0.5:
            raise ValueError(f"trim must be in [0, 0.5), got {trim}")
        if frames_per_clip is not None and (frames_per_clip < 2 or frames_per_clip % 2):
            raise ValueError(f"frames_per_clip must be even and >= 2, got {frames_per_clip}")
        if fps is not None and not (math.isfinite(fps) and fps > 0):
            raise ValueError(f"fps must be a positive number or None, got {fps}")
        answers.check_order_style(style, clips, "clips")
        self.clips = clips
        self.trim = trim
        self.composite = composite
        self.style = style
        self.frames_per_clip = frames_per_clip
        self.fps = fps

    def make_example(self, item: Video, rng: random.Random) -> Example:
        pieces, fps = self._cut(item)
        shown = list(range(self.clips))
        rng.shuffle(shown)
        ordered = [pieces[slot] for slot in shown]
        show = self._composite if self.composite else self._separate
        media, intro = show(ordered, fps)
        meta = {"clips": self.clips, "shown": shown, "clip_frames": len(pieces[0])}
        question = intro + self._ask()
        return Example(self.user_message(media, question), answers.shuffle_answer(shown), self.name, meta)

    def _cut(self, item: Video) -> tuple[list[np.ndarray], float]:
        """Equal clips in chronological order, trimmed in time before their frames are taken, and
        the frame rate of those frames.

        Frame ``t`` of the item shows the slice ``[t, t + 1) / fps`` of its video's time (sources
        sample each slice at its middle). Clip ``i`` spans ``size`` slices from ``i * size``; its
        central part starts ``trim * size`` slices in from either end, and only frames whose whole
        slice lies in it are kept, so the boundary frames go even when the trim is under a frame.
        `frames_per_clip` and `fps` then take that many of them at the middles of equal parts of
        the central part. Qwen-VL merges frame pairs, so every video part needs an even frame
        count: separate clips are cut to an even length each; back-to-back clips only need an even
        total (a frame pair may then span a cut, as in any edited video)."""
        frames = frames_of(item)
        size = len(frames) // self.clips
        cut = math.ceil(round(size * self.trim, 9))  # rounded first: 0.1 * 20 must stay 2 frames
        central = size - 2 * cut
        count = self._count(central, central / item.fps)
        if count < 2:
            raise SkipItem(f"{item.name or 'video'}: {len(frames)} frames give {self.clips} clips under 2 frames")
        if count < central - 1:  # taken evenly from the central part
            taken = cut + np.floor((np.arange(count) + 0.5) * central / count).astype(np.int64)
            fps = item.fps * count / central
        else:  # all of it, or all but its last frame
            taken = cut + np.arange(count)
            fps = item.fps
        return [frames[i * size + taken] for i in range(self.clips)], fps

    def _count(self, central: int, seconds: float) -> int:
        """How many of the ``central`` frames (``seconds`` of video) to show of each clip."""
        count = central
        if self.frames_per_clip is not None:
            count = min(count, self.frames_per_clip)
        if self.fps is not None:
            count = min(count, max(2, math.floor(seconds * self.fps + 1e-9)))
        if not self.composite or (count * self.clips) % 2:
            count = count // 2 * 2
        return count

    def _separate(self, pieces: list[np.ndarray], fps: float) -> tuple[list[dict], str]:
        """The clips as numbered video parts; the introduction goes before them, so no text is left
        over."""
        k = len(pieces)
        media = [
            {
                "type": "text",
                "text": (
                    f"These {k} videos are clips of equal length cut from one video, shown in a shuffled order and "
                    f"numbered 1 to {k} in the order shown.\n"
                ),
            }
        ]
        for i, piece in enumerate(pieces, start=1):
            media += [{"type": "text", "text": f"Clip {i}:"}, video_part(piece, fps)]
        return media, ""

    def _composite(self, pieces: list[np.ndarray], fps: float) -> tuple[list[dict], str]:
        """The clips played back to back as one video, and the text that introduces it."""
        seconds = len(pieces[0]) / fps
        intro = (
            f"This video is made of {len(pieces)} clips of {seconds:.1f} seconds each, cut from one video and "
            f"played in a shuffled order. Number the clips 1 to {len(pieces)} in the order they play here.\n"
        )
        return [video_part(np.concatenate(pieces), fps)], intro

    def _ask(self) -> str:
        if self.style == "order":
            return (
                "Put the clips back in chronological order: give the clip numbers from the earliest clip to the "
                f"latest, {self.clips} numbers separated by commas."
            )
        options = answers.order_options(self.clips)
        return f"Which option lists the clip numbers from the earliest clip to the latest?\n{options}"
