"""Referring-expression grounding (RefCOCO-style): an image and a phrase in, the phrase's bounding
box out.

Boxes are written ``[x1, y1, x2, y2]`` in pixels of the image as shown (Qwen2.5-VL) or normalised to
0-1000 (Qwen2-VL, Qwen3-VL); the JSON (``{"bbox_2d": [...]}``) and ``(x1,y1),(x2,y2)`` forms those
models print are read too. The reward is the IoU with the true box, ``accuracy`` is IoU >=
``threshold`` (Acc@0.5).
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from typing import Literal

from PIL import Image

from tasks.base import Example, SkipItem, Task
from tasks.regions import Region

_NUM = r"\s*(\d{1,6}(?:\.\d{1,6})?)\s*"
# the three ways models write a box, matched on the stripped answer; numbers and separators
# alternate, so no two quantifiers compete for the same characters (no backtracking) and nothing but
# spaces is dropped
_BOXES = (
    re.compile(rf"\[{_NUM},{_NUM},{_NUM},{_NUM}\]"),
    re.compile(rf"{_NUM},{_NUM},{_NUM},{_NUM}"),
    re.compile(rf"\({_NUM},{_NUM}\)\s*,\s*\({_NUM},{_NUM}\)"),
)
_QWEN2_TOKENS = re.compile(r"<\|object_ref_start\|>[^<]{0,500}<\|object_ref_end\|>|<\|box_(?:start|end)\|>")
_MAX_JSON = 2000  # characters: one box in JSON is far shorter; longer answers are not parsed at all


class IoUTask(Task):
    """A task graded by an intersection over union: ``reward.total`` is the IoU (plus the format
    reward), ``accuracy`` is 1 when the IoU reaches ``threshold``; subclasses score ``{"accuracy",
    "iou"}``."""

    parts = ("accuracy", "iou")

    def __init__(self, threshold: float = 0.5, **kwargs):
        super().__init__(**kwargs)
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold

    def graded(self, iou: float) -> dict[str, float]:
        """The score parts of an answer with this IoU."""
        return {"accuracy": float(iou >= self.threshold), "iou": iou}

    def total(self, parts: dict[str, float]) -> float:
        return parts["iou"] + self.format_weight * parts["format"]


@dataclass
class Referring:
    """An image with one or more referring expressions and the box each names: what
    `ReferringGrounding` consumes (benchmark sources give one expression per item, so each is
    evaluated once).

    Attributes:
        image: The image.
        targets: ``(expression, [x1, y1, x2, y2])`` pairs, boxes in pixels of ``image`` from its
            top-left corner.
        name: Where it came from (a file and row), for logs.
    """

    image: Image.Image
    targets: list[tuple[str, list[float]]]
    name: str = ""


def box_iou(a: list[float], b: list[float]) -> float:
    """Intersection over union of two ``[x1, y1, x2, y2]`` boxes; 0 when both are empty."""
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def parse_box(answer: str) -> list[float] | None:
    """One box ``[x1, y1, x2, y2]`` (non-negative, ``x1 <= x2``, ``y1 <= y2``) written as four
    numbers in brackets, as ``(x1,y1),(x2,y2)`` (Qwen2-VL's box tokens allowed), or as Qwen2.5-VL /
    Qwen3-VL JSON ``{"bbox_2d": [...]}`` (alone, in a one-element list, or in a code fence); None
    for anything else."""
    text = _QWEN2_TOKENS.sub("", _unfenced(answer.strip())).strip()
    if re.match(r"(?:\[\s*)?\{", text):
        box = _json_box(text)
    else:
        match = next((m for m in (form.fullmatch(text) for form in _BOXES) if m), None)
        box = [float(v) for v in match.groups()] if match else None
    if box is None or box[0] > box[2] or box[1] > box[3]:
        return None
    return box


def _unfenced(text: str) -> str:
    """The inside of a Markdown code fence (```` ```json ... ``` ````), or ``text`` when it is not
    one."""
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return text
    inside = text[3:-3]
    return inside.removeprefix("json").strip()


def _json_box(text: str) -> list[float] | None:
    if len(text) > _MAX_JSON:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    box = value.get("bbox_2d") if isinstance(value, dict) else None
    numbers = (
        isinstance(box, list)
        and len(box) == 4
        and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in box)
    )
    return [float(v) for v in box] if numbers else None


def fit_size(width: int, height: int, factor: int, max_pixels: int) -> tuple[int, int]:
    """``(width, height)`` rounded to multiples of ``factor`` and shrunk, aspect ratio kept, to at
    most ``max_pixels`` (the rule Qwen2.5-VL's processor resizes by, so it leaves an image of this
    size alone)."""
    scale = min(1.0, math.sqrt(max_pixels / (width * height)))
    w, h = (max(factor, round(side * scale / factor) * factor) for side in (width, height))
    while w * h > max_pixels and max(w, h) > factor:
        w, h = (w - factor, h) if w >= h else (w, h - factor)
    return w, h


class BoxTask(IoUTask):
    """An `IoUTask` answered with a box ``[x1, y1, x2, y2]`` (see `parse_box`) that must lie inside
    ``meta["bounds"]``, the (width, height) of the image as shown; ``example.answer`` is the true
    box there."""

    def answer_text(self, example: Example) -> str:
        return "[" + ", ".join(str(v) for v in example.answer) + "]"

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        box = self.region(example, answer)
        return None if box is None else self.graded(box_iou(box, example.answer))

    def parse_answer(self, example: Example, answer: str) -> Region | None:
        """The box `region` reads (``[1, 2, 3, 4]`` and ``(1.0,2.0),(3.0,4.0)`` are one box), as a
        ballot that majority voting counts by overlap (`tasks.regions.region_winner`)."""
        box = self.region(example, answer)
        return None if box is None else Region(tuple(box), *self.bounds(example))

    def region(self, example: Example, answer: str | None) -> list[float] | None:
        """The answered box, or None for an invalid answer or a box leaving the image (what
        `tasks.RegionConsistency` votes with)."""
        box = parse_box(answer or "")
        width, height = self.bounds(example)
        return None if box is None or box[2] > width or box[3] > height else box

    def bounds(self, example: Example) -> tuple[int, int]:
        """``(width, height)`` of the space answers live in (the shown image, or 1000 x 1000
        normalised)."""
        width, height = example.meta["bounds"]
        return int(width), int(height)


class ReferringGrounding(BoxTask):
    """Show an image and one referring expression (drawn by the rng among the item's targets); ask
    for its box.

    Args:
        coords: ``"absolute"``: pixels of the image as shown (Qwen2.5-VL); the image is shown
            resized so both sides are multiples of ``factor`` within ``max_pixels``, so Qwen2.5-VL's
            processor keeps its size. ``"normalized"``: 0-1000 of the width and height (Qwen2-VL,
            Qwen3-VL); the image is shown as stored.
        factor: Side multiple of the shown image for ``absolute`` (28 for Qwen2.5-VL).
        max_pixels: Most pixels of the shown image for ``absolute`` (set the processor's
            ``max_pixels`` to at least this).
        threshold: IoU at which an answer counts as correct (``accuracy``); the reward is the IoU
            itself.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "referring_grounding"
    modality = "referring"
    levels = {}  # labelled data: no pretext source makes its items

    def __init__(
        self,
        coords: Literal["absolute", "normalized"] = "absolute",
        factor: int = 28,
        max_pixels: int = 1280 * 28 * 28,
        threshold: float = 0.5,
        **kwargs,
    ):
        super().__init__(threshold=threshold, **kwargs)
        if coords not in ("absolute", "normalized"):
            raise ValueError(f"coords must be 'absolute' or 'normalized', got {coords!r}")
        if factor < 1 or max_pixels < factor * factor:
            raise ValueError(f"need factor >= 1 and max_pixels >= factor^2, got {factor}, {max_pixels}")
        self.coords = coords
        self.factor = factor
        self.max_pixels = max_pixels

    def make_example(self, item: Referring, rng: random.Random) -> Example:
        if not item.targets:
            raise SkipItem(f"{item.name or 'image'}: no referring expression")
        expression, box = rng.choice(item.targets)
        width, height = item.image.size
        image = item.image.convert("RGB")
        if self.coords == "absolute":
            shown = fit_size(width, height, self.factor, self.max_pixels)
            image = image.resize(shown, Image.Resampling.BICUBIC)
            space = f"pixel coordinates of this {shown[0]} x {shown[1]} image"
        else:
            shown = (1000, 1000)
            space = "coordinates normalised to 0-1000 of the image's width and height"
        scale = (shown[0] / width, shown[1] / height)
        truth = [round(v * scale[i % 2]) for i, v in enumerate(box)]  # the box as the policy should write it
        question = (
            f'Locate "{expression.strip()}" in the image. Answer with its bounding box as [x1, y1, x2, y2] '
            f"in {space}, x from the left edge and y from the top."
        )
        meta = {"expression": expression, "bounds": list(shown), "box": [float(v) for v in box]}
        return Example(self.user_message([{"type": "image", "image": image}], question), truth, self.name, meta)
