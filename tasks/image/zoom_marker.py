"""Zoom marker: name the fine pattern inside a tiny marker of a large image, which only a crop at
full resolution shows; the crop tool's task of "thinking with images" (DeepEyes, arXiv 2505.14362;
MGPO, arXiv 2507.05920), checkable by construction.

Every pattern (one-pixel stripes, a checkerboard) averages to the same flat colour over each block
the image is shrunk by, so the shown views of two patterns are byte-identical: the marker's border
gives its position away, its pattern only a crop.
"""

from __future__ import annotations

import random

import numpy as np
from PIL import Image

from tasks import answers
from tasks.base import Example, check_subset
from tasks.tool_use import ToolUseTask, crop_grounding, crop_offer
from tasks.tools.base import Call, Toolbox
from tasks.tools.crop_zoom import FULL_IMAGE, SHOWN_SIZE, CropZoom

PATTERNS = {
    "horizontal": "horizontal stripes",
    "vertical": "vertical stripes",
    "checkerboard": "a checkerboard",
    "diagonal": "diagonal stripes",
}
_BORDER = (255, 0, 0)
# pairs of colours far apart, so stripes are plain at full resolution and blend to a mid tone
_COLOURS = [((0, 0, 0), (255, 255, 255)), ((0, 0, 255), (255, 255, 0)), ((0, 128, 0), (255, 0, 255))]


class ZoomMarker(ToolUseTask):
    """Show a large image shrunk ``zoom`` times with a small red-bordered marker in it and ask
    which fine pattern fills the marker; the policy may crop and zoom (`tasks.CropZoom`) before it
    answers.

    Args:
        patterns: The options, lettered in this order: ``horizontal``, ``vertical``,
            ``checkerboard``, ``diagonal`` (diagonal needs ``zoom`` a multiple of 4 to blend).
        view_size: Side of the shown (square) image in pixels; the full one is ``zoom`` times
            larger.
        zoom: How many times the full image is shrunk for the prompt: even, so every pattern blends.
        marker: Side of the patterned square in shown pixels; its border adds one on each side.
        tools: Offer the crop tool; False asks the same examples in one turn (the control arm).
        max_turns: Turns per row with the tool, the answer's included.
        crop_pixels: Pixels of a crop as the tool returns it (`tasks.CropZoom`'s ``max_pixels``).
        grounding_weight: Weight of ``grounding``: the IoU of the first crop with the marker's box
            (with ``grid``, the share of the marker's box the first crop covers).
        grid: Split the shown image into ``grid x grid`` cells, put the marker inside one and let
            the expert crop that cell: a few distinct calls, which a tiny model can learn (0: the
            marker anywhere, the expert crops its box).
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "zoom_marker"
    modality = "image"
    parts = ("accuracy", "grounding")
    levels = {
        "2way": {},
        "4way": {"patterns": list(PATTERNS)},
        "4way_small": {"patterns": list(PATTERNS), "marker": 4},
    }

    def __init__(
        self,
        patterns: list[str] = ["horizontal", "vertical"],  # noqa: B006  (never mutated)
        view_size: int = 224,
        zoom: int = 4,
        marker: int = 8,
        tools: bool = True,
        max_turns: int = 2,
        crop_pixels: int = 224 * 224,
        grounding_weight: float = 0.5,
        grid: int = 0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.set_toolbox(Toolbox((CropZoom(crop_pixels),), max_turns) if tools else None, grounding_weight)
        self.tools, self.max_turns, self.crop_pixels = tools, max_turns, crop_pixels
        check_subset("patterns", patterns, PATTERNS)
        if len(set(patterns)) != len(patterns) or len(patterns) < 2:
            raise ValueError(f"patterns must hold at least two distinct patterns, got {patterns}")
        if zoom < 2 or zoom % (4 if "diagonal" in patterns else 2):
            raise ValueError(f"zoom must be even (a multiple of 4 with diagonal stripes), got {zoom}")
        if marker < 1 or view_size < marker + 4:
            raise ValueError(f"need marker >= 1 and view_size >= marker + 4, got {marker}, {view_size}")
        if grid < 0 or grid and view_size // grid < marker + 4:
            raise ValueError(f"a grid cell ({view_size} // {grid} px) must hold the bordered marker ({marker + 4} px)")
        self.patterns = list(patterns)
        self.view_size, self.zoom, self.marker, self.grid = view_size, zoom, marker, grid

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        side = self.marker + 2  # with the border
        cell = self._cell(rng)
        x, y = rng.randrange(cell[0] + 1, cell[2] - side), rng.randrange(cell[1] + 1, cell[3] - side)
        box = [x, y, x + side, y + side]
        colours = rng.choice(_COLOURS)
        pattern = rng.choice(self.patterns)
        full = self.render(item, box, colours, pattern)
        view = self.shrink(full)
        meta = {SHOWN_SIZE: [self.view_size] * 2, "box": box, "patterns": self.patterns}
        if self.grid:
            meta["cell"] = cell
        messages = self.user_message([{"type": "image", "image": view}], self._question())
        return Example(messages, pattern, self.name, meta, tool_media={FULL_IMAGE: full})

    def _cell(self, rng: random.Random) -> list[int]:
        """The shown-pixel box the marker is placed in: a random grid cell, or the whole image."""
        if not self.grid:
            return [0, 0, self.view_size, self.view_size]
        size = self.view_size // self.grid
        column, row = rng.randrange(self.grid), rng.randrange(self.grid)
        return [column * size, row * size, (column + 1) * size, (row + 1) * size]

    def render(self, item: Image.Image, box: list[int], colours: tuple, pattern: str) -> Image.Image:
        """The full-resolution image: ``item`` cropped square and enlarged, with the marker drawn at
        ``box`` (shown pixels, border included)."""
        side = self.view_size * self.zoom
        image = item.convert("RGB")
        short = min(image.size)
        left, top = (image.width - short) // 2, (image.height - short) // 2
        image = image.crop((left, top, left + short, top + short)).resize((side, side), Image.Resampling.BICUBIC)
        pixels = np.array(image)  # [side, side, 3]
        x1, y1, x2, y2 = (v * self.zoom for v in box)
        pixels[y1:y2, x1:x2] = _BORDER
        inner = self.marker * self.zoom
        mask = pattern_mask(pattern, inner)  # [inner, inner]
        pixels[y1 + self.zoom : y2 - self.zoom, x1 + self.zoom : x2 - self.zoom] = np.where(
            mask[..., None], colours[0], colours[1]
        )
        return Image.fromarray(pixels)

    def shrink(self, full: Image.Image) -> Image.Image:
        """The shown view: each ``zoom x zoom`` block of ``full`` averaged (a box filter, which
        blends every pattern exactly)."""
        return full.resize((self.view_size,) * 2, Image.Resampling.BOX)

    def _question(self) -> str:
        size = f"{self.view_size}x{self.view_size}"
        question = (
            f"Somewhere in this {size} image is a small square with a red border, filled with a fine two-colour "
            "pattern too small to make out at this size. Which pattern fills it?\n"
            + answers.choice_prompt([PATTERNS[p] for p in self.patterns])
        )
        if self.toolbox is None:
            return question
        return f"{question}\n{crop_offer(self.toolbox.max_turns - 1)}"

    def answer_text(self, example: Example) -> str:
        return answers.letter(example.meta["patterns"].index(example.answer))

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        pattern = answers.parse_letter(answer, example.meta["patterns"], self.strict_letters)
        return None if pattern is None else {"accuracy": float(pattern == example.answer)}

    def expert_calls(self, example: Example) -> list[str]:
        return ["<crop>{}, {}, {}, {}</crop>".format(*example.meta.get("cell", example.meta["box"]))]

    def grounding(self, example: Example, calls: list[Call]) -> float | None:
        return crop_grounding(example, calls, covered="cell" in example.meta)


def pattern_mask(pattern: str, side: int) -> np.ndarray:
    """Which pixels of a ``side x side`` pattern take its first colour, ``[side, side]`` bool: each
    even block (4x4 for diagonal stripes) holds as many of one colour as of the other."""
    y, x = np.mgrid[0:side, 0:side]
    masks = {"horizontal": y % 2, "vertical": x % 2, "checkerboard": (x + y) % 2, "diagonal": (x + y) % 4 // 2}
    return masks[pattern] == 0
