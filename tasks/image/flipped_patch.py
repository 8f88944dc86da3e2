"""Flipped patch recognition (Spatial-SSRL, arXiv 2510.27606; InternLM/Spatial-SSRL
data_process/Flip.py).

An image is divided into a 2x2 grid of labeled patches (0-3, raster order) and one patch is flipped
vertically or horizontally (probability 1/2 each); the answer is ``Label-Direction`` with direction
0 for a vertical and 1 for a horizontal flip (``3-0``), the codes of ``cv2.flip``.
"""

from __future__ import annotations

import random
import re

from PIL import Image

from tasks.base import Example, SkipItem, Task
from tasks.image import grid

FLIPS = (Image.Transpose.FLIP_TOP_BOTTOM, Image.Transpose.FLIP_LEFT_RIGHT)  # direction 0: vertical, 1: horizontal
_ANSWER = re.compile(r"\s*(\d{1,3})\s*-\s*(\d)\s*")


class FlippedPatch(Task):
    """Flip one patch of a ``rows x cols`` grid and ask which patch it was and how it was flipped.

    Args:
        rows: Grid rows.
        cols: Grid columns; ``rows * cols`` must be at least 2.
        labels: Draw each patch's red border and white 0-based label (Spatial-SSRL); without them
            the prompt numbers the patches in raster order.
        min_tile: Images whose patches would be smaller than this many pixels on a side are skipped.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "flipped_patch"
    modality = "image"
    parts = ("accuracy", "patch", "direction")
    levels = {f"{k}x{k}": {"rows": k, "cols": k} for k in (2, 3, 4)}

    def __init__(self, rows: int = 2, cols: int = 2, labels: bool = True, min_tile: int = 14, **kwargs):
        super().__init__(**kwargs)
        if rows < 1 or cols < 1 or rows * cols < 2:
            raise ValueError(f"need rows, cols >= 1 and at least two patches, got {rows}x{cols}")
        self.rows = rows
        self.cols = cols
        self.labels = labels
        self.min_tile = min_tile

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        tiles = grid.cut(item.convert("RGB"), self.rows, self.cols, self.min_tile)
        patch = rng.randrange(len(tiles))
        direction = rng.randrange(2)
        flipped = tiles[patch].transpose(FLIPS[direction])
        if flipped.tobytes() == tiles[patch].tobytes():
            raise SkipItem(f"patch {patch} looks the same flipped {('vertically', 'horizontally')[direction]}")
        tiles[patch] = flipped
        if self.labels:
            tiles = [grid.mark(tile, str(i)) for i, tile in enumerate(tiles)]
        media = [{"type": "image", "image": grid.paste(tiles, self.rows, self.cols)}]
        meta = {"rows": self.rows, "cols": self.cols, "patch": patch, "direction": direction}
        return Example(self.user_message(media, self._question()), [patch, direction], self.name, meta)

    def _question(self) -> str:
        k = self.rows * self.cols
        labels = ", ".join(str(i) for i in range(k - 1)) + f" and {k - 1}"
        return (
            f"The image has been divided into {k} patches labeled {labels}, left to right and top to bottom. "
            "One of the patches is flipped either vertically or horizontally. Based on visual clues such as "
            "continuity, alignment and context, give the label of the flipped patch and the direction of the "
            "flip in the format 'Label-Direction'. The direction can only be 0 (flipped vertically) or 1 "
            "(flipped horizontally)."
        )

    def answer_text(self, example: Example) -> str:
        return "{}-{}".format(*example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        pred = self.parse_answer(example, answer)
        if pred is None:
            return None
        patch, direction = (float(p == t) for p, t in zip(pred, example.answer, strict=True))
        return {"accuracy": patch * direction, "patch": patch, "direction": direction}

    def parse_answer(self, example: Example, answer: str) -> tuple[int, int] | None:
        """The patch label and the direction (``3-0``, ``03 - 0`` are one answer)."""
        match = _ANSWER.fullmatch(answer)
        k = example.meta["rows"] * example.meta["cols"]
        if not match or int(match[1]) >= k or int(match[2]) > 1:
            return None
        return int(match[1]), int(match[2])
