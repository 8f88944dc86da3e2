"""`VideoFolder`: every video file under a directory tree, decoded with decord into frames sampled
evenly in time.

`decode` is the one decoding path, shared with `SyntheticVideos`; frame counts follow qwen-vl-utils
(even, >= 2).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from PIL import Image

from datamodules.sources.base import Source, find_files
from datamodules.sources.limits import MAX_IMAGE_PIXELS, TOO_LARGE, check_limit
from tasks import SkipItem, Video
from tasks.extras import require

#: How frames are picked: ``zoo`` (the middles of equal slices of the trimmed part, `VideoFolder`)
#: or ``qwen`` (what qwen-vl-utils' ``fetch_video`` picks: its frame count rule, ``smart_nframes``,
#: and a rounded ``linspace`` from the part's first frame to its last).
FRAME_SELECTIONS = ("zoo", "qwen")
#: qwen-vl-utils' fewest frames when sampling by ``fps``.
QWEN_MIN_FRAMES = 4


class VideoFolder(Source):
    """Videos found recursively under ``root``, sorted by path so an index names the same file on
    every run.

    Item ``i`` is a `tasks.Video` of frames sampled from the central part of file ``i``, its stored
    frames ``[trim * N, (1 - trim) * N)`` of ``N`` (leaving out fades, title cards and credits):
    ``num_frames`` frames, or ``fps`` per second of that part when ``num_frames`` is ``None``; an
    even number, at least 2, as Qwen-VL merges consecutive frame pairs. Frame ``k`` of ``n`` is the
    stored frame at the middle of the ``k``-th of ``n`` equal slices of the part, so consecutive
    frames are ``1 / fps`` seconds apart on average, where the item's ``fps`` is ``n`` over the
    part's duration: ``n * r / ((1 - 2 * trim) * N)``, ``r`` being the container's average frame
    rate. A part of fewer than ``n`` frames is first widened evenly at both ends (up to the whole
    video), so that no frame is taken twice.

    A video shorter than ``min_seconds`` raises `tasks.SkipItem` of kind ``too_short`` before any
    frame is decoded (counted as ``data/skipped/VideoFolder/too_short``, apart from broken files). A
    file that cannot be decoded (corrupt or truncated, no video stream, too few frames) raises
    `tasks.SkipItem`; FFmpeg may also print its own complaint about it to stderr. A damaged file
    that still decodes can give different frames from run to run (decord decodes in a thread of its
    own); intact files always give the same.

    Args:
        root: Directory searched recursively.
        extensions: File suffixes to include, matched case-insensitively.
        num_frames: Frames per video, rounded up to even; a video with fewer stored frames is
            skipped. ``None`` samples by ``fps`` instead.
        fps: Frames to sample per second of video, used when ``num_frames`` is ``None``; the count
            is rounded down to even, at least 2 and at most ``max_frames`` (so the item's ``fps``
            can be lower than asked).
        max_frames: Most frames per video when sampling by ``fps``.
        max_pixels: Downsize frames, keeping the aspect ratio, so that height x width is at most
            this many pixels; ``None`` keeps the stored size.
        trim: Fraction of the video's length left out at each end.
        min_seconds: Videos shorter than this (stored frames over the container's average frame
            rate) are skipped; Visual Jigsaw drops videos under 24 s. 0 keeps every video.
        frame_selection: ``zoo``, or ``qwen`` to pick the frames Qwen's reference pipeline
            (qwen-vl-utils) picks: ``num_frames`` rounded to the nearest even count, or by ``fps``
            at least 4 frames; evenly from the part's first stored frame to its last, both kept
            (with ``trim`` 0, qwen-vl-utils' frames of the whole video, tested against it).
        max_image_pixels: Most pixels of a stored frame (read from the container's header); a
            video with larger frames is skipped before any frame is decoded (counted as
            ``too_large``): one decoded frame of it could hold gigabytes.
    """

    modality = "video"

    def __init__(
        self,
        root: str,
        extensions: tuple[str, ...] = (".mp4", ".mkv", ".webm", ".avi", ".mov"),
        num_frames: int | None = 16,
        fps: float | None = None,
        max_frames: int = 64,
        max_pixels: int | None = 256 * 256,
        trim: float = 0.05,
        min_seconds: float = 0.0,
        frame_selection: str = "zoo",
        max_image_pixels: int = MAX_IMAGE_PIXELS,
    ):
        if not (math.isfinite(min_seconds) and min_seconds >= 0):
            raise ValueError(f"min_seconds must be a number >= 0, got {min_seconds}")
        self.sampling = dict(
            num_frames=num_frames,
            fps=fps,
            max_frames=max_frames,
            max_pixels=max_pixels,
            trim=trim,
            frame_selection=frame_selection,
        )
        check_sampling(**self.sampling)
        self.min_seconds = min_seconds
        self.max_image_pixels = check_limit(max_image_pixels, "max_image_pixels")
        self.root, self.extensions, self.paths = find_files(root, extensions, "VideoFolder")

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Video:
        return decode(
            self.paths[index], **self.sampling, min_seconds=self.min_seconds, max_image_pixels=self.max_image_pixels
        )

    def describe(self, index: int) -> str:
        return self.paths[index]


def check_sampling(
    num_frames: int | None,
    fps: float | None,
    max_frames: int,
    max_pixels: int | None,
    trim: float,
    frame_selection: str = "zoo",
) -> None:
    """Raise ValueError for sampling options `decode` cannot honour."""
    if frame_selection not in FRAME_SELECTIONS:
        raise ValueError(f"frame_selection must be one of {FRAME_SELECTIONS}, got {frame_selection!r}")
    if (num_frames is None) == (fps is None):
        raise ValueError(
            f"give exactly one of num_frames and fps (set the other to None), got num_frames={num_frames}, fps={fps}"
        )
    if num_frames is not None and num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    if fps is not None and not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps}")
    if max_frames < 2:
        raise ValueError(f"max_frames must be >= 2, got {max_frames}")
    if max_pixels is not None and max_pixels < 1:
        raise ValueError(f"max_pixels must be >= 1 or None, got {max_pixels}")
    if not 0.0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")


def sample_indices(
    total: int,
    video_fps: float,
    num_frames: int | None = 16,
    fps: float | None = None,
    max_frames: int = 64,
    trim: float = 0.05,
    frame_selection: str = "zoo",
) -> tuple[np.ndarray, float]:
    """Which of ``total`` stored frames to take, and the frame rate of the taken frames (see
    `VideoFolder`).

    Raises ValueError when the video has too few frames.
    """
    if frame_selection == "qwen":
        return qwen_indices(total, video_fps, num_frames, fps, max_frames, trim)
    span = total * (1.0 - 2.0 * trim)  # stored frames in the central part
    if num_frames is not None:
        count = num_frames + num_frames % 2
        if count > total:
            raise ValueError(f"only {total} frame(s), fewer than the {count} to sample")
    else:
        count = min(span / video_fps * fps, max_frames, total)
        count = max(2, int(count) // 2 * 2)
        if total < 2:
            raise ValueError(f"only {total} frame(s); at least 2 are needed")
    span = min(float(total), max(span, count))  # widened so that no frame is taken twice
    start = (total - span) / 2
    indices = np.floor(start + (np.arange(count) + 0.5) * (span / count)).astype(np.int64)
    return indices, count * video_fps / span


def decode(
    path: str,
    num_frames: int | None = 16,
    fps: float | None = None,
    max_frames: int = 64,
    max_pixels: int | None = 256 * 256,
    trim: float = 0.05,
    min_seconds: float = 0.0,
    max_image_pixels: int = MAX_IMAGE_PIXELS,
    frame_selection: str = "zoo",
) -> Video:
    """Decode frames of the video at ``path`` with decord, sampled and resized as `VideoFolder`
    describes.

    Raises `tasks.SkipItem` naming ``path`` for anything that cannot be decoded, one of kind
    ``too_short`` for a video shorter than ``min_seconds`` and one of kind ``too_large``, before
    anything is decoded, for frames of more than ``max_image_pixels`` pixels.
    """
    check_sampling(num_frames, fps, max_frames, max_pixels, trim, frame_selection)
    decord = require("decord", "video", "video sources decode with decord")
    try:
        _check_frame_size(path, max_image_pixels)
        reader = decord.VideoReader(str(path), ctx=decord.cpu(0))
        total = len(reader)
        video_fps = float(reader.get_avg_fps())
        if not (math.isfinite(video_fps) and video_fps > 0):
            raise ValueError(f"frame rate {video_fps}")
        if total / video_fps < min_seconds:
            raise SkipItem(f"{path}: {total / video_fps:.1f} s long, under min_seconds={min_seconds}", kind="too_short")
        indices, sampled_fps = sample_indices(total, video_fps, num_frames, fps, max_frames, trim, frame_selection)
        frames = _read(reader, indices, decord.DECORDError)
    except SkipItem:
        raise
    except Exception as err:  # decord raises RuntimeError, DECORDError, ...: all mean the file is unusable
        reason = (str(err).strip().splitlines() or [""])[0][:300]
        raise SkipItem(f"{path}: {type(err).__name__}: {reason}") from err
    return Video(frames=_fit(frames, max_pixels), fps=sampled_fps, name=str(path))


def qwen_indices(
    total: int, video_fps: float, num_frames: int | None, fps: float | None, max_frames: int, trim: float
) -> tuple[np.ndarray, float]:
    """`sample_indices` as qwen-vl-utils picks frames: the trim as its ``video_start`` /
    ``video_end``, the count by its ``smart_nframes`` (``max_frames`` in place of its 768), the
    frames by a rounded float32 ``linspace`` (torch's, so that halves round as there)."""
    duration = total / video_fps
    start = math.ceil(trim * duration * video_fps) if trim else 0
    end = min(math.floor((1.0 - trim) * duration * video_fps), total - 1)
    span = end - start + 1
    if num_frames is not None:
        count = round(num_frames / 2) * 2  # round half to even, as Python's round
    else:
        most = math.floor(min(max_frames, span) / 2) * 2
        count = math.floor(min(max(span / video_fps * fps, QWEN_MIN_FRAMES), most, span) / 2) * 2
    if not 2 <= count <= span:
        raise ValueError(f"only {span} frame(s) to take {max(count, 2)} from")
    indices = torch.linspace(start, end, count).round().long().numpy()
    return indices, count / span * video_fps


def _check_frame_size(path: str, max_image_pixels: int) -> None:
    """Raise `tasks.SkipItem` (``too_large``) when the first video stream's frames, as the
    container's header states them, hold more than ``max_image_pixels`` pixels; a file without a
    readable header is left to decord, which names the problem."""
    av = require("av", "video", "video sources read frame sizes with PyAV")
    try:
        with av.open(str(path)) as container:
            context = container.streams.video[0].codec_context
            width, height = context.width, context.height
    except Exception:  # unreadable, or no video stream: decord's error says which
        return
    if width * height > max_image_pixels:
        raise SkipItem(
            f"{path}: frames of {width}x{height} pixels, over max_image_pixels={max_image_pixels}", kind=TOO_LARGE
        )


def _read(reader, indices: np.ndarray, decord_error: type[Exception]) -> np.ndarray:
    """Frames ``[T, H, W, 3]`` uint8 at ``indices``."""
    try:
        frames = reader.get_batch(indices.tolist()).asnumpy()
    except decord_error:
        # decord 0.6 get_batch fails on frames 2, 3, 4, 6, 8, 12, 16, 24, 48 or 72 pixels wide; one
        # frame at a time works there but comes back mis-shaped (see _unpad). A damaged file fails
        # here again.
        frames = np.stack([_unpad(reader[int(i)].asnumpy()) for i in indices])
    if frames.ndim != 4 or frames.shape[0] != len(indices) or frames.shape[-1] != 3 or 0 in frames.shape:
        raise ValueError(f"decoded frames of shape {frames.shape}, expected ({len(indices)}, H, W, 3)")
    return frames.astype(np.uint8, copy=False)


def _unpad(frame: np.ndarray) -> np.ndarray:
    """One frame from decord, repaired: decord pads rows to a multiple of 32 pixels and, where 3 x
    the padded width is a multiple of the width, returns ``[H, W, C]`` with a wrong channel count
    ``C`` (4 for 48 pixels wide) instead of ``[H, padded W, 3]``. Checked exact for every width from
    2 to 200 pixels."""
    height, width, channels = frame.shape
    if channels == 3:
        return frame
    padded = frame.size // (height * 3)
    return frame.reshape(height, padded, 3)[:, :width]


def _fit(frames: np.ndarray, max_pixels: int | None) -> np.ndarray:
    """``frames`` downsized (bicubic, aspect ratio kept) so that height x width <=
    ``max_pixels``."""
    _, height, width, _ = frames.shape
    if max_pixels is None or height * width <= max_pixels:
        return frames
    scale = math.sqrt(max_pixels / (height * width))
    w = max(1, int(width * scale))
    h = max(1, int(height * scale))
    while w * h > max_pixels:  # float rounding can leave one row or column too many
        w, h = (w - 1, h) if w >= h else (w, h - 1)
    resample = Image.Resampling.BICUBIC
    return np.stack([np.asarray(Image.fromarray(frame).resize((w, h), resample)) for frame in frames])
