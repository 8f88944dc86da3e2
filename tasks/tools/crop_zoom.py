"""CropZoom: cut a box of the shown image out of the full-resolution one and show it enlarged, the
crop tool of "thinking with images" (DeepEyes, arXiv 2505.14362; MGPO, arXiv 2507.05920; ViGoRL).
Works on any image a task keeps in full (scenes, GUI screenshots).
"""

from __future__ import annotations

import math
import re
from typing import Any

from PIL import Image

from tasks.tools.base import Call, Tool, ToolError

#: ``Example.tool_media`` key of the full-resolution image a crop is cut from (a PIL image).
FULL_IMAGE = "image"
#: ``Example.meta`` key of the shown image's ``[width, height]``: the coordinates of a call.
SHOWN_SIZE = "shown_size"

_BOX = re.compile(r"\s*(-?\d{1,6})\s*,\s*(-?\d{1,6})\s*,\s*(-?\d{1,6})\s*,\s*(-?\d{1,6})\s*")
# Qwen-VL's processor refuses images more than 200 times longer than wide; a sliver shows nothing
# anyway, so a call for one is refused before the policy's next turn fails to encode
_MAX_ASPECT = 20


class CropZoom(Tool):
    """``<crop>x1, y1, x2, y2</crop>``: the box (left, top, right, bottom, integer pixels of the
    image as the prompt shows it) is clamped to the image, mapped onto the full-resolution image
    and its crop resized to ``max_pixels``, so a small box is enlarged.

    Args:
        max_pixels: Pixels of the returned crop (its aspect kept): a crop is scaled up or down to
            about this many.
    """

    name = "crop"
    syntax = "<crop>x1, y1, x2, y2</crop>"

    def __init__(self, max_pixels: int = 224 * 224):
        if max_pixels < 1:
            raise ValueError(f"max_pixels must be >= 1, got {max_pixels}")
        self.max_pixels = max_pixels

    def parse(self, arguments: str) -> tuple[int, int, int, int]:
        match = _BOX.fullmatch(arguments)
        if match is None:
            raise ToolError(f"a crop is four integers x1, y1, x2, y2, got {arguments[:80]!r}")
        x1, y1, x2, y2 = map(int, match.groups())
        if x2 <= x1 or y2 <= y1:
            raise ToolError(f"a crop needs x2 > x1 and y2 > y1, got {x1, y1, x2, y2}")
        return x1, y1, x2, y2

    def run(self, call: Call, example: Any) -> list[dict]:
        full = example.tool_media[FULL_IMAGE]
        shown = shown_box(call.args, example.meta[SHOWN_SIZE])
        crop = full.crop(full_box(shown, example.meta[SHOWN_SIZE], full.size))
        zoomed = fit(crop, self.max_pixels)
        text = f"The region {', '.join(map(str, shown))} at full resolution, {zoomed.width}x{zoomed.height} pixels."
        return [{"type": "image", "image": zoomed}, {"type": "text", "text": text}]


def shown_box(box: tuple[int, ...], shown_size: list[int]) -> tuple[int, int, int, int]:
    """``box`` clamped to the shown ``[width, height]``; `ToolError` when nothing of it is left or
    it is a sliver."""
    width, height = shown_size
    x1, x2 = (min(max(x, 0), width) for x in (box[0], box[2]))
    y1, y2 = (min(max(y, 0), height) for y in (box[1], box[3]))
    if x2 <= x1 or y2 <= y1:
        raise ToolError(f"the box {tuple(box)} lies outside the {width}x{height} image")
    if max(x2 - x1, y2 - y1) > _MAX_ASPECT * min(x2 - x1, y2 - y1):
        raise ToolError(f"the box {tuple(box)} is over {_MAX_ASPECT} times longer than wide")
    return x1, y1, x2, y2


def full_box(box: tuple[int, ...], shown_size: list[int], full_size: tuple[int, int]) -> tuple[int, int, int, int]:
    """A box in shown pixels as full-resolution pixels, widened outward to whole pixels so it covers
    every full pixel the shown ones were made from."""
    sx, sy = full_size[0] / shown_size[0], full_size[1] / shown_size[1]
    return math.floor(box[0] * sx), math.floor(box[1] * sy), math.ceil(box[2] * sx), math.ceil(box[3] * sy)


def fit(image: Image.Image, max_pixels: int) -> Image.Image:
    """``image`` scaled (up or down, aspect kept) to at most ``max_pixels`` pixels, each side
    >= 1."""
    scale = math.sqrt(max_pixels / (image.width * image.height))
    size = (max(1, math.floor(image.width * scale)), max(1, math.floor(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)
