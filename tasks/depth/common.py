"""RGB-D items and what the depth tasks share: checking an item, flat regions, back-projection,
numbered or coloured markers and the near-to-far ordering every ordering task asks for.

Depth is z-depth in metres (distance along the optical axis, as ScanNet, DIODE and MegaDepth store
it) with invalid pixels as NaN. Camera coordinates follow OpenCV: x right, y down, z forward; pixel
``(u, v)`` covers ``[u, u + 1) x [v, v + 1)``, so its centre is ``(u + 0.5, v + 0.5)``.
"""

from __future__ import annotations

import random
import re
from abc import abstractmethod
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image, ImageDraw, ImageFont

from tasks import answers
from tasks.base import Example, SkipItem
from tasks.order import OrderReward, OrderTask

MIN_MARKER_RADIUS = 6  # pixels: smaller circles cannot hold a legible digit
#: Marker colours of ``labels="colours"``: point p is drawn in the p-th (1-based), named so in
#: prompts and answers.
MARKER_COLOURS = {
    "red": (230, 20, 20),
    "blue": (30, 80, 240),
    "yellow": (250, 220, 20),
    "green": (30, 180, 50),
    "purple": (150, 50, 200),
    "orange": (250, 140, 20),
    "cyan": (20, 210, 230),
    "white": (255, 255, 255),
    "black": (0, 0, 0),
}


@dataclass
class RGBD:
    """A registered colour image and depth map with the camera's intrinsics: what RGB-D sources
    yield.

    Attributes:
        rgb: Colour image, ``[H, W, 3]`` uint8 (a PIL image is accepted and converted).
        depth: Z-depth in metres, ``[H, W]`` float32; NaN where the sensor gave nothing.
        intrinsics: Pinhole camera matrix ``[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]`` of this
            resolution, or None when unknown (tasks that need it skip the item).
        name: Where it came from (a path, or a synthetic id), for logs.
    """

    rgb: np.ndarray
    depth: np.ndarray
    intrinsics: np.ndarray | None
    name: str = ""

    def __post_init__(self):
        if isinstance(self.rgb, Image.Image):
            self.rgb = np.asarray(self.rgb.convert("RGB"))


def checked(item: RGBD, need_intrinsics: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(rgb [H, W, 3] uint8, depth [H, W] float32, intrinsics [3, 3] float64 or None)`` of
    ``item``, invalid depth (0, negative, inf) as NaN; SkipItem when the parts do not fit together,
    or when ``need_intrinsics`` and the item has none."""
    rgb = np.asarray(item.rgb)
    depth = np.asarray(item.depth, dtype=np.float32)
    name = item.name or "rgbd"
    if rgb.ndim != 3 or rgb.shape[-1] != 3 or rgb.dtype != np.uint8 or depth.shape != rgb.shape[:2]:
        raise SkipItem(
            f"{name}: need [H, W, 3] uint8 rgb and [H, W] depth, got {rgb.shape} {rgb.dtype} and {depth.shape}"
        )
    depth = np.where(np.isfinite(depth) & (depth > 0), depth, np.nan)
    if item.intrinsics is None:
        if need_intrinsics:
            raise SkipItem(f"{name}: no camera intrinsics, which this task needs")
        return rgb, depth, None
    intrinsics = np.asarray(item.intrinsics, dtype=np.float64)
    if intrinsics.shape != (3, 3) or not np.isfinite(intrinsics).all() or min(intrinsics[0, 0], intrinsics[1, 1]) <= 0:
        raise SkipItem(f"{name}: intrinsics must be a finite 3x3 matrix with positive focal lengths")
    return rgb, depth, intrinsics


def local_range(depth: np.ndarray, size: int) -> np.ndarray:
    """Max minus min depth in the ``size x size`` window centred on each pixel, ``[H, W]``; NaN
    where the window holds an invalid pixel or leaves the image. ``size`` is odd."""
    half = size // 2
    out = np.full(depth.shape, np.nan, dtype=np.float32)
    if min(depth.shape) < size:
        return out
    # separable: a window's min is the min over its rows of each row's min (NaN propagates through
    # both)
    low = sliding_window_view(sliding_window_view(depth, size, axis=1).min(-1), size, axis=0).min(-1)
    high = sliding_window_view(sliding_window_view(depth, size, axis=1).max(-1), size, axis=0).max(-1)
    out[half : depth.shape[0] - half, half : depth.shape[1] - half] = high - low
    return out


def neighbour_step(depth: np.ndarray) -> np.ndarray:
    """Largest depth difference between each pixel and its 4 neighbours, ``[H, W]``; NaN where one
    of them is invalid or outside the image. Small on smooth surfaces, even slanted ones; large on
    depth edges."""
    step = np.full(depth.shape, np.nan, dtype=np.float32)
    centre = depth[1:-1, 1:-1]
    neighbours = [depth[:-2, 1:-1], depth[2:, 1:-1], depth[1:-1, :-2], depth[1:-1, 2:]]
    step[1:-1, 1:-1] = np.max([abs(n - centre) for n in neighbours], axis=0)
    return step


def normalised(depth: np.ndarray) -> np.ndarray:
    """Depth rescaled to [0, 1] between its 0.5th and 99.5th percentiles (clipped), NaN kept
    (Spatial-SSRL)."""
    valid = depth[np.isfinite(depth)]
    if valid.size == 0:
        return depth.copy()
    low, high = np.percentile(valid, [0.5, 99.5])
    return np.clip((depth - low) / max(high - low, 1e-6), 0.0, 1.0)


def flat_pixels(depth: np.ndarray, patch: float, flatness: float, border: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised depth ``[H, W]`` and the ``(v, u)`` centres ``[M, 2]`` of flat patches: square
    patches ``patch`` of the shorter side wide (odd, >= 3 px) whose normalised depth varies by less
    than ``flatness``, centred at least ``border`` pixels inside the image."""
    norm = normalised(depth)
    size = max(3, round(patch * min(depth.shape)) // 2 * 2 + 1)
    return norm, inner_pixels(local_range(norm, size) < flatness, border)


def inner_pixels(mask: np.ndarray, border: int) -> np.ndarray:
    """``(v, u)`` of the true pixels of ``mask`` ``[H, W]`` at least ``border`` pixels inside the
    image, ``[M, 2]``."""
    height, width = mask.shape
    inner = np.zeros_like(mask)
    inner[border : height - border, border : width - border] = True
    return np.argwhere(mask & inner)


def back_project(points: np.ndarray, depth: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """Camera-frame positions ``[N, 3]`` of pixel centres ``points`` ``[N, 2]`` as ``(u, v)`` at z
    ``depth`` ``[N]``."""
    u = points[:, 0] + 0.5
    v = points[:, 1] + 0.5
    x = (u - intrinsics[0, 2]) * depth / intrinsics[0, 0]
    y = (v - intrinsics[1, 2]) * depth / intrinsics[1, 1]
    return np.stack([x, y, depth], axis=-1)


def marker_radius(rgb: np.ndarray, fraction: float) -> int:
    """Marker radius in pixels: ``fraction`` of the image's shorter side, at least
    `MIN_MARKER_RADIUS`."""
    return max(MIN_MARKER_RADIUS, round(fraction * min(rgb.shape[:2])))


def draw_markers(rgb: np.ndarray, points: list[tuple[int, int]], radius: int, colours: bool = False) -> Image.Image:
    """The image with translucent red discs numbered 1, 2, ... in white at ``points`` (pixel ``(u,
    v)``), as Visual Jigsaw marks its depth-ordering points; with ``colours``, opaque discs without
    digits instead, point p in the p-th of `MARKER_COLOURS`, ringed in black or, for the black one,
    white (so no background hides one)."""
    image = Image.fromarray(rgb).convert("RGBA")
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    font = ImageFont.load_default(size=max(8, round(1.4 * radius)))
    palette = list(MARKER_COLOURS.values())
    ring = max(1, radius // 4)
    for label, (u, v) in enumerate(points, start=1):
        x = u + 0.5
        y = v + 0.5
        box = (x - radius, y - radius, x + radius, y + radius)
        if colours:
            colour = palette[label - 1]
            edge = (255, 255, 255, 255) if colour == (0, 0, 0) else (0, 0, 0, 255)
            draw.ellipse(box, fill=(*colour, 255), outline=edge, width=ring)
        else:
            draw.ellipse(box, fill=(230, 20, 20, 170))
            draw.text((x, y), str(label), fill=(255, 255, 255, 255), font=font, anchor="mm")
    return Image.alpha_composite(image, overlay).convert("RGB")


def dashed_layout(k: int) -> str:
    """The answer layout Spatial-SSRL names for ``k`` regions: ``Smallest-Middle-Largest`` for 3,
    with ``Middle1``, ``Middle2``, ... for more."""
    middle = ["Middle"] if k == 3 else [f"Middle{i}" for i in range(1, k - 1)]
    return "-".join(["Smallest", *middle, "Largest"])


def parse_dashed(answer: str, k: int) -> list[int] | None:
    """Labels 1..k each exactly once joined by dashes (``2-1-3``, spaces around them allowed); else
    None."""
    tokens = [token.strip() for token in answer.strip().split("-")]
    if not all(token.isdecimal() and len(token) <= 2 for token in tokens):  # isdigit() admits "²"
        return None
    labels = [int(token) for token in tokens]
    return labels if sorted(labels) == list(range(1, k + 1)) else None


def parse_names(answer: str, names: list[str], dash: bool) -> list[int] | None:
    """Labels ``1..k`` of the ``k`` ``names`` (case-insensitive), each exactly once, joined by
    dashes (``dash``) or by commas or spaces; else None."""
    tokens = [t.strip() for t in answer.strip().split("-")] if dash else re.split(r"\s*,\s*|\s+", answer.strip())
    lowered = [name.lower() for name in names]
    if not all(token.lower() in lowered for token in tokens):
        return None
    labels = [lowered.index(token.lower()) + 1 for token in tokens]
    return labels if sorted(labels) == list(range(1, len(names) + 1)) else None


def far_apart(point: tuple[int, int], chosen: list[tuple[int, int]], distance: float) -> bool:
    """Whether ``point`` is at least ``distance`` pixels from every point in ``chosen``."""
    return all((point[0] - u) ** 2 + (point[1] - v) ** 2 >= distance**2 for u, v in chosen)


class DepthOrdering(OrderTask):
    """Mark points of an RGB-D image with shuffled labels and ask for them from nearest to farthest.

    Subclasses choose the points (`pick`), describe them (`question`, naming them with `listing`)
    and call `check_style` with their number of points. The answer follows the permutation
    convention of `tasks.answers`: for each point from nearest to farthest, its label (a number, or
    with ``labels="colours"`` a colour name).

    Args:
        marker_size: Marker radius as a fraction of the image's shorter side (at least 6 pixels).
        style: ``"order"``: the answer lists the point labels (``2, 3, 1``). ``"choice"``: every
            order is a lettered option and the answer is the letter (at most 4 points); the chosen
            order is graded the same.
        separator: How an ``order`` answer joins the labels: ``"comma"`` (``2, 3, 1``; commas or
            spaces are read) or ``"dash"`` (``2-3-1``, Spatial-SSRL's 'Smallest-Middle-Largest'
            format; only dashes are read).
        labels: ``"numbers"``: translucent red markers with white digits 1, 2, ... (Visual Jigsaw).
            ``"colours"``: opaque markers without digits, point 1 red, 2 blue, then yellow, green,
            purple, orange, cyan, white, black (`MARKER_COLOURS`); prompts, options and answers name
            the colours (``blue, red``). Colours need no reading: the tiny Qwen2.5-VL did not learn
            to tell the digits apart in 800 supervised steps, and learned the colours
            (docs/depth.md).
        reward: Which graded score is the accuracy (see `tasks.OrderTask`).
        partial_credit: Scale of the graded accuracy of a valid but wrong order; an exact order
            earns 1.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    modality = "rgbd"

    def __init__(
        self,
        marker_size: float = 0.03,
        style: Literal["order", "choice"] = "order",
        separator: Literal["comma", "dash"] = "comma",
        labels: Literal["numbers", "colours"] = "numbers",
        reward: OrderReward = "footrule",
        partial_credit: float = 1.0,
        **kwargs,
    ):
        super().__init__(reward=reward, partial_credit=partial_credit, **kwargs)
        if not 0 < marker_size < 0.25:
            raise ValueError(f"marker_size must be in (0, 0.25), got {marker_size}")
        answers.check_order_style(style)
        if separator not in ("comma", "dash") or (separator == "dash" and style != "order"):
            raise ValueError(f"separator must be 'comma' or 'dash' (the latter with style 'order'), got {separator!r}")
        if labels not in ("numbers", "colours"):
            raise ValueError(f"labels must be 'numbers' or 'colours', got {labels!r}")
        self.marker_size = marker_size
        self.style = style
        self.separator = separator
        self.labels = labels

    def check_style(self, k: int) -> None:
        """Reject a lettered choice over more orders than fit the alphabet and a prompt."""
        answers.check_order_style(self.style, k, "points")

    @abstractmethod
    def pick(
        self, rgb: np.ndarray, depth: np.ndarray, radius: int, rng: random.Random, name: str
    ) -> list[tuple[int, int]]:
        """Pixels ``(u, v)`` to mark, sorted from nearest to farthest; SkipItem when none fit."""

    @abstractmethod
    def question(self, k: int) -> str:
        """What the policy is shown and asked to order, for ``k`` marked points."""

    def names(self, k: int) -> list[str]:
        """How answers write the labels of ``k`` points: ``1``, ``2``, ... or ``red``, ``blue``,
        ..."""
        return list(MARKER_COLOURS)[:k] if self.labels == "colours" else [str(i) for i in range(1, k + 1)]

    def listing(self, k: int) -> str:
        """The labels of ``k`` points in a sentence: ``1, 2 and 3`` or ``red, blue and yellow``."""
        names = self.names(k)
        return f"{', '.join(names[:-1])} and {names[-1]}"

    def make_example(self, item: RGBD, rng: random.Random) -> Example:
        rgb, depth, _ = checked(item)
        radius = marker_radius(rgb, self.marker_size)
        slots = self.pick(rgb, depth, radius, rng, item.name or "rgbd")  # nearest first
        shown = list(range(len(slots)))
        rng.shuffle(shown)
        points = [slots[slot] for slot in shown]  # point p carries label p + 1
        meta = {
            "points": [list(map(int, p)) for p in points],
            "depths": [round(float(depth[v, u]), 4) for u, v in points],
        }
        media = [{"type": "image", "image": draw_markers(rgb, points, radius, self.labels == "colours")}]
        return Example(self.user_message(media, self._ask(len(points))), answers.shuffle_answer(shown), self.name, meta)

    def _ask(self, k: int) -> str:
        what = "colours" if self.labels == "colours" else "numbers"
        if self.style == "order" and self.separator == "dash":
            return (
                f"{self.question(k)} Sort them from the smallest to the largest distance from the camera, in "
                f"the format '{dashed_layout(k)}'."
            )
        if self.style == "order":
            return (
                f"{self.question(k)} Answer with the {k} {what} from the closest to the farthest, separated by commas."
            )
        options = answers.choice_prompt([self._written(order, ", ") for order in answers.orderings(k)])
        return f"{self.question(k)} Which option lists the {what} from the closest to the farthest?\n{options}"

    def _written(self, order: list[int], separator: str) -> str:
        """An order of labels as an answer writes it."""
        names = self.names(len(order))
        return separator.join(names[label - 1] for label in order)

    def answer_text(self, example: Example) -> str:
        if self.style == "choice":
            return super().answer_text(example)
        return self._written(example.answer, "-" if self.separator == "dash" else ", ")

    def parse(self, answer: str, k: int) -> list[int] | None:
        if self.style == "order" and self.labels == "colours":
            return parse_names(answer, self.names(k), self.separator == "dash")
        return parse_dashed(answer, k) if self.separator == "dash" else super().parse(answer, k)
