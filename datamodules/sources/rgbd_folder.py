"""`RGBDFolder`: colour images paired with depth maps (16-bit PNG, .npy, .exr) and camera intrinsics
(JSON)."""

from __future__ import annotations

import json
import logging
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from datamodules.sources.base import Source
from datamodules.sources.limits import MAX_IMAGE_PIXELS, check_limit, check_pixels
from tasks import RGBD, SkipItem

log = logging.getLogger(__name__)

RGB_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
DEPTH_EXTENSIONS = (".png", ".npy", ".exr")
INTRINSICS_FILE = "intrinsics.json"


class RGBDFolder(Source):
    """RGB-D frames found recursively under ``root``, sorted by path so an index names the same
    frame on every run.

    Layout: each colour image ``<dir>/<rgb_dir>/<stem>.<jpg|png|...>`` pairs with the depth map
    ``<dir>/<depth_dir>/<stem><depth_suffix>.<png|npy|exr>`` (with ``rgb_dir`` and ``depth_dir``
    empty, both lie in the same folder and ``depth_suffix`` tells them apart, as in DIODE's
    ``x.png`` + ``x_depth.npy``). A 16-bit PNG holds integer units (millimetres by default); .npy
    and .exr hold metres. Depth 0, negative, NaN or inf is invalid and becomes NaN. Images or depth
    maps without a partner are left out, counted in ``unpaired`` and logged once. A frame that
    cannot be read raises `tasks.SkipItem` (the data module skips it, counts it and logs it once).

    Intrinsics come from the first of: ``<stem>.json`` beside the colour image; the nearest
    ``intrinsics.json`` in its folder or a folder above it, up to ``root``; ``fov``. Both files hold
    ``{"fx": 577.9, "fy": 577.9, "cx": 320.0, "cy": 240.0, "width": 640, "height": 480}`` in pixels,
    where pixel ``(u, v)`` covers ``[u, u + 1) x [v, v + 1)`` (OpenCV calibrations put ``cx`` half a
    pixel lower; that is negligible here). ``width`` and ``height`` (optional) give the resolution
    the numbers are for; they are rescaled to the depth map's. Colour images of another size than
    their depth map are resized to it (the two are taken to be registered: same viewpoint and field
    of view).

    Reading .exr needs OpenCV (``pip install opencv-python-headless``), which zoo does not install:
    without it an .exr depth map is a clear error at construction.

    Args:
        root: Directory searched recursively.
        rgb_dir: Name of the folders holding colour images; ``""`` for colour and depth in one
            folder.
        depth_dir: Name of the sibling folders holding depth maps; ``""`` for the colour image's own
            folder.
        depth_suffix: Appended to a colour image's stem to name its depth map (needed when both
            share a folder).
        depth_scale: Metres per stored depth unit, for every file; ``None`` means 0.001 for 16-bit
            PNG (millimetres) and 1 for .npy and .exr (metres).
        fov: Horizontal field of view in degrees for frames without intrinsics file (principal point
            at the centre, square pixels); with ``None`` such frames have no intrinsics (depth
            ordering still works on them; tasks that back-project, like `tasks.RelativePosition3D`,
            skip them).
        max_side: Downsize each frame (colour bilinear, depth nearest, intrinsics scaled) so its
            longer side is at most this many pixels; ``None`` keeps the depth map's size.
        max_image_pixels: Most pixels of a colour image as decoded (JPEGs decode at 1/2, 1/4 or 1/8
            scale when that fits) or of a depth PNG; a larger one skips its frame unread.
    """

    modality = "rgbd"

    def __init__(
        self,
        root: str,
        rgb_dir: str = "rgb",
        depth_dir: str = "depth",
        depth_suffix: str = "",
        depth_scale: float | None = None,
        fov: float | None = None,
        max_side: int | None = None,
        max_image_pixels: int = MAX_IMAGE_PIXELS,
    ):
        if rgb_dir == depth_dir and not depth_suffix:
            raise ValueError("colour and depth in the same folders need a depth_suffix to tell them apart")
        if depth_scale is not None and not (math.isfinite(depth_scale) and depth_scale > 0):
            raise ValueError(f"depth_scale must be a positive number or None, got {depth_scale}")
        if fov is not None and not 0 < fov < 180:
            raise ValueError(f"fov must be in (0, 180) degrees or None, got {fov}")
        if max_side is not None and max_side < 1:
            raise ValueError(f"max_side must be a positive number of pixels or None, got {max_side}")
        self.max_image_pixels = check_limit(max_image_pixels, "max_image_pixels")
        self.root = Path(root).expanduser()
        if not self.root.is_dir():
            raise FileNotFoundError(f"RGBDFolder root {str(self.root)!r} is not an existing directory")
        self.rgb_dir = rgb_dir
        self.depth_dir = depth_dir
        self.depth_suffix = depth_suffix
        self.depth_scale = depth_scale
        self.fov = fov
        self.max_side = max_side
        self.pairs, self.unpaired = self._pair(sorted(p for p in self.root.rglob("*") if p.is_file()))
        if not self.pairs:
            raise FileNotFoundError(
                f"no colour image with a depth map under {str(self.root)!r} (layout: "
                f"<dir>/{rgb_dir}/<stem>.jpg + <dir>/{depth_dir}/<stem>{depth_suffix}.png)"
            )
        if self.unpaired:
            log.warning(
                "RGBDFolder %s: %d file(s) without a partner left out, e.g. %s",
                self.root,
                len(self.unpaired),
                ", ".join(self.unpaired[:3]),
            )
        if any(depth.suffix.lower() == ".exr" for _, depth in self.pairs) and _opencv() is None:
            raise ImportError(
                ".exr depth maps need OpenCV, which is not installed: pip install "
                "opencv-python-headless (or convert them to .npy)"
            )

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> RGBD:
        rgb_path, depth_path = self.pairs[index]
        try:
            depth = read_depth(depth_path, self.depth_scale, self.max_image_pixels)
            with Image.open(rgb_path) as image:
                check_pixels(image, rgb_path, self.max_image_pixels, reduce=True)
                rgb = image.convert("RGB")
            intrinsics = self.intrinsics(rgb_path, depth.shape)
        except SkipItem:
            raise
        except Exception as err:  # decoders raise OSError, ValueError, SyntaxError...: all mean skip
            raise SkipItem(f"{rgb_path} + {depth_path.name}: {type(err).__name__}: {err}") from err
        if rgb.size != depth.shape[::-1]:
            rgb = rgb.resize(depth.shape[::-1], Image.Resampling.BILINEAR)
        return fit(RGBD(np.asarray(rgb), depth, intrinsics, name=str(rgb_path)), self.max_side)

    def describe(self, index: int) -> str:
        return str(self.pairs[index][0])

    def intrinsics(self, rgb_path: Path, shape: tuple[int, int]) -> np.ndarray | None:
        """The camera matrix of the frame whose colour image is ``rgb_path``, for a depth map of
        ``shape`` (None when there is no intrinsics file and no ``fov``)."""
        height, width = shape
        for folder in [rgb_path.parent, *rgb_path.parent.parents]:
            candidate = rgb_path.with_suffix(".json") if folder == rgb_path.parent else None
            for path in [candidate, folder / INTRINSICS_FILE]:
                if path is not None and path.is_file():
                    fx, fy, cx, cy, w, h = _read_intrinsics(str(path))
                    sx = width / (w or width)
                    sy = height / (h or height)
                    return np.array([[fx * sx, 0, cx * sx], [0, fy * sy, cy * sy], [0, 0, 1]])
            if folder == self.root:
                break
        if self.fov is None:
            return None
        focal = width / 2 / math.tan(math.radians(self.fov) / 2)
        return np.array([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1]])

    def _pair(self, files: list[Path]) -> tuple[list[tuple[Path, Path]], list[str]]:
        """``(colour, depth)`` pairs in sorted order, and the files that have no partner."""
        present = set(files)
        depths = {p for p in files if self._is_depth(p)}
        pairs = []
        used = set()
        unpaired = []
        for path in files:
            if path.suffix.lower() not in RGB_EXTENSIONS or path in depths or not self._is_rgb(path):
                continue
            folder = path.parent.parent / self.depth_dir if self.rgb_dir else path.parent / self.depth_dir
            match = next(
                (
                    d
                    for ext in DEPTH_EXTENSIONS
                    for d in [folder / (path.stem + self.depth_suffix + ext)]
                    if d in present
                ),
                None,
            )
            if match is None:
                unpaired.append(str(path))
            else:
                pairs.append((path, match))
                used.add(match)
        unpaired += sorted(str(p) for p in depths - used)
        return pairs, unpaired

    def _is_rgb(self, path: Path) -> bool:
        return not self.rgb_dir or path.parent.name == self.rgb_dir

    def _is_depth(self, path: Path) -> bool:
        if path.suffix.lower() not in DEPTH_EXTENSIONS or not path.stem.endswith(self.depth_suffix):
            return False
        return path.parent.name == self.depth_dir if self.depth_dir else bool(self.depth_suffix)


def read_depth(path: Path, scale: float | None = None, max_pixels: int = MAX_IMAGE_PIXELS) -> np.ndarray:
    """Depth in metres, ``[H, W]`` float32, invalid as NaN: a 16-bit PNG times ``scale`` (default
    0.001), or a .npy / .exr (``[H, W]`` or ``[H, W, 1]``) times ``scale`` (default 1). A PNG of
    more than ``max_pixels`` pixels is refused unread (`tasks.SkipItem`)."""
    suffix = path.suffix.lower()
    if suffix == ".png":
        with Image.open(path) as image:
            check_pixels(image, path, max_pixels)
            if image.mode not in ("I;16", "I;16B", "I;16L", "I"):
                raise ValueError(f"a depth PNG must be 16-bit single-channel, got mode {image.mode}")
            raw = np.asarray(image).astype(np.float32)
        default = 0.001
    elif suffix == ".npy":
        raw = np.load(path, allow_pickle=False)
        default = 1.0
    else:
        raw, default = _opencv().imread(str(path), -1), 1.0  # -1: IMREAD_UNCHANGED, float32 stays float32
        if raw is None:
            raise ValueError("OpenCV could not read it")
    raw = np.asarray(raw)
    if raw.ndim == 3 and raw.shape[-1] == 1:
        raw = raw[..., 0]
    if raw.ndim != 2 or raw.dtype.kind not in "fiu" or min(raw.shape) == 0:
        raise ValueError(f"a depth map must be [H, W] numbers, got {raw.shape} {raw.dtype}")
    depth = raw.astype(np.float32) * np.float32(default if scale is None else scale)
    return np.where(np.isfinite(depth) & (depth > 0), depth, np.float32(np.nan))


def fit(item: RGBD, max_side: int | None) -> RGBD:
    """``item`` downsized so its longer side is at most ``max_side`` (colour bilinear, depth nearest
    so no depth is invented at edges, intrinsics scaled); unchanged when it already fits or
    ``max_side`` is None."""
    height, width = item.depth.shape
    if max_side is None or max(height, width) <= max_side:
        return item
    scale = max_side / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    rgb = Image.fromarray(item.rgb).resize(size, Image.Resampling.BILINEAR)
    depth = Image.fromarray(item.depth).resize(size, Image.Resampling.NEAREST)
    sx = size[0] / width
    sy = size[1] / height
    intrinsics = None if item.intrinsics is None else item.intrinsics * np.array([[sx], [sy], [1.0]])
    return RGBD(np.asarray(rgb), np.asarray(depth), intrinsics, item.name)


@lru_cache(maxsize=256)
def _read_intrinsics(path: str) -> tuple[float, float, float, float, float | None, float | None]:
    """``fx, fy, cx, cy, width, height`` from an intrinsics JSON file (see `RGBDFolder`)."""
    with open(path) as f:
        data = json.load(f)
    values = [float(data[key]) for key in ("fx", "fy", "cx", "cy")]
    size = [float(data[key]) if key in data else None for key in ("width", "height")]
    if not all(math.isfinite(v) for v in values) or min(values[:2]) <= 0:
        raise ValueError(f"{path}: fx, fy must be positive and cx, cy finite, got {values}")
    return (*values, *size)


def _opencv():
    """The cv2 module, or None when OpenCV is not installed."""
    try:
        import cv2
    except ImportError:
        return None
    return cv2
