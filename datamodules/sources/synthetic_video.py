"""`SyntheticVideos`: procedurally drawn clips of shapes bouncing over a brightening background, so
video tasks need no data on disk. Each clip is written once to a lossless mp4 and read back through
`VideoFolder`'s decord path, so training on them exercises real decoding.
"""

from __future__ import annotations

import colorsys
import os
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

from datamodules.sources.base import Source
from datamodules.sources.shapes import pixel_centres, shape_mask
from datamodules.sources.video_folder import decode
from tasks import SkipItem, Video
from tasks.extras import require

_VERSION = 1  # part of the cache path: bump it whenever the drawing changes


class SyntheticVideos(Source):
    """Clips of coloured shapes bouncing around a frame; item ``i`` is a pure function of ``(seed,
    i)``.

    Each clip has 1-3 circles and squares moving in straight lines at constant speed and bouncing
    off the frame edges; `trajectories` gives their centres in every frame. Shapes are bright and
    saturated (HSV value >= 0.85), 8-15% of the shorter side in radius (half side for squares), with
    hues spread around the colour wheel, and move 3-8% of the shorter side per frame; a later shape
    is drawn over an earlier one. The background is a linear gradient between two dark colours
    (channels 0.08-0.4 of full scale) in a random direction, which brightens evenly by 0.12-0.22 of
    full scale over the clip: time has a direction even where nothing moves, and the same direction
    in every clip.

    Clips are stored as H.264 in RGB at crf 0 (libx264rgb, lossless: decoded frames equal `render`
    exactly, where 4:4:4 YUV is off by up to 2 levels and 4:2:0 smears colours across shape edges),
    under ``<root>/v<version>-<T>x<H>x<W>-<fps>fps/<seed>/<i>.mp4``. A clip is written on first
    access, to a temporary file then renamed, so ranks and workers may share the cache.

    Args:
        size: Number of distinct clips (the length of the source).
        num_frames: Frames per clip, even (Qwen-VL merges consecutive frame pairs).
        height: Frame height in pixels.
        width: Frame width in pixels.
        fps: Frame rate stored in the files and reported with each clip.
        seed: Selects a different family of clips.
        root: Cache directory for the mp4 files; ``None`` means ``$ZOO_CACHE/videos``
            (``~/.cache/zoo/videos`` when ``ZOO_CACHE`` is unset).
    """

    modality = "video"

    def __init__(
        self,
        size: int = 1000,
        num_frames: int = 16,
        height: int = 56,
        width: int = 56,
        fps: float = 4.0,
        seed: int = 0,
        root: str | None = None,
    ):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if num_frames < 2 or num_frames % 2:
            raise ValueError(f"num_frames must be even and >= 2 (Qwen-VL merges frame pairs), got {num_frames}")
        if min(height, width) < 16:
            raise ValueError(f"height and width must be >= 16 pixels, got {height} x {width}")
        if not fps > 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.size = size
        self.num_frames = num_frames
        self.height = height
        self.width = width
        self.fps = fps
        self.seed = seed
        cache = Path(os.environ.get("ZOO_CACHE", Path.home() / ".cache" / "zoo")) / "videos"
        self.root = cache if root is None else Path(root).expanduser()

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Video:
        path = self.path(index)
        if not path.exists():
            _write_mp4(path, self.render(index), self.fps)
        try:
            return self._decode(path)
        except SkipItem:  # a damaged cache file (a full disk, a stray edit): draw it again, once
            _write_mp4(path, self.render(index), self.fps)
            return self._decode(path)

    def describe(self, index: int) -> str:
        return f"SyntheticVideos(seed={self.seed})[{index}]"

    def path(self, index: int) -> Path:
        """Where clip ``index`` is cached."""
        self._check(index)
        geometry = f"v{_VERSION}-{self.num_frames}x{self.height}x{self.width}-{self.fps:g}fps"
        return self.root / geometry / str(self.seed) / f"{index}.mp4"

    def trajectories(self, index: int) -> np.ndarray:
        """Centres of the shapes of clip ``index`` in every frame, ``[S, T, 2]`` as ``(x, y)``
        pixels from the top-left corner of the frame (the pixel in row ``r``, column ``c`` covers
        ``[c, c + 1) x [r, r + 1)``)."""
        return np.stack([shape["centres"] for shape in self._scene(index)["shapes"]])

    def render(self, index: int) -> np.ndarray:
        """The frames of clip ``index`` as drawn, ``[T, H, W, 3]`` uint8 (what decoding the cached
        file gives)."""
        scene = self._scene(index)
        y, x = pixel_centres(self.height, self.width)  # [H, W] each
        t = np.arange(self.num_frames)[:, None, None, None] / (self.num_frames - 1)  # [T, 1, 1, 1]
        frames = scene["background"] + scene["rise"] * t  # [T, H, W, 3]
        for shape in scene["shapes"]:
            cx, cy = (shape["centres"][:, i, None, None] for i in (0, 1))  # [T, 1, 1] each
            frames[shape_mask(shape["kind"], x, y, cx, cy, shape["radius"])] = shape["colour"]  # [T, H, W] mask
        return (np.clip(frames, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)

    def _decode(self, path: Path) -> Video:
        return decode(str(path), num_frames=self.num_frames, fps=None, max_pixels=None, trim=0.0)

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticVideos of size {self.size}")

    def _scene(self, index: int) -> dict:
        """Everything clip ``index`` is drawn from; all randomness from ``(seed, index)``."""
        self._check(index)
        rng = np.random.default_rng([self.seed, index])
        near, far = rng.uniform(0.08, 0.4, (2, 3))
        angle = rng.uniform(0, 2 * np.pi)
        y, x = pixel_centres(self.height, self.width)
        along = (x - self.width / 2) * np.cos(angle) + (y - self.height / 2) * np.sin(angle)  # [H, W]
        ramp = (along / np.hypot(self.width, self.height) + 0.5)[..., None]  # [H, W, 1], within [0, 1]
        scene = {"background": near + (far - near) * ramp, "rise": rng.uniform(0.12, 0.22)}
        count = int(rng.integers(1, 4))
        first_hue = rng.uniform()
        scene["shapes"] = [self._shape(rng, (first_hue + k / count) % 1.0) for k in range(count)]
        return scene

    def _shape(self, rng: np.random.Generator, hue: float) -> dict:
        side = min(self.height, self.width)
        kind = ("circle", "square")[int(rng.integers(2))]
        radius = rng.uniform(0.08, 0.15) * side
        colour = colorsys.hsv_to_rgb(
            (hue + rng.uniform(-0.05, 0.05)) % 1.0, rng.uniform(0.75, 1.0), rng.uniform(0.85, 1.0)
        )
        low, high = np.full(2, radius), np.array([self.width, self.height]) - radius  # (x, y) bounds of the centre
        start = rng.uniform(low, high)
        heading = rng.uniform(0, 2 * np.pi)
        velocity = rng.uniform(0.03, 0.08) * side * np.array([np.cos(heading), np.sin(heading)])
        straight = start + velocity * np.arange(self.num_frames)[:, None]  # [T, 2] without walls
        return {"kind": kind, "radius": radius, "colour": np.array(colour), "centres": _bounce(straight, low, high)}


def _bounce(positions: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Positions on an unbounded line folded into ``[low, high]``, as if reflected by walls at both
    ends."""
    length = high - low
    phase = np.mod(positions - low, 2 * length)
    return low + np.where(phase <= length, phase, 2 * length - phase)


def _write_mp4(path: Path, frames: np.ndarray, fps: float) -> None:
    """Write ``frames`` ``[T, H, W, 3]`` losslessly to ``path``, atomically (temporary file, then
    rename)."""
    av = require("av", "video", "SyntheticVideos writes its clips with PyAV")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    os.close(handle)
    try:
        with av.open(temporary, "w", format="mp4") as container:
            stream = container.add_stream("libx264rgb", rate=Fraction(fps).limit_denominator(1001))
            stream.width = frames.shape[2]
            stream.height = frames.shape[1]
            stream.pix_fmt = "rgb24"
            stream.options = {"crf": "0"}
            for frame in frames:
                container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
            container.mux(stream.encode())  # flush the encoder
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
