"""Jigsaw single-piece questions: where in the original image does one shuffled piece belong?

Follows the ``single`` question of Jigsaw-R1 (arXiv 2505.23590; zifuwanggg/Jigsaw-R1
utils/jigsaw_utils.py, utils/prompt.py): the tiles of an ``m x n`` grid are shuffled into one image,
one shown position is named, and the answer is the original position of the piece shown there, one
number.
"""

from __future__ import annotations

import random
import re

from PIL import Image

from tasks.base import Example
from tasks.image.jigsaw import Jigsaw

_NUMBER = re.compile(r"\d{1,3}")


class JigsawSingle(Jigsaw):
    """Shuffle the tiles of a ``rows x cols`` grid, name one shown piece and ask for the number of
    the position it belongs at in the original image (positions numbered like the pieces, in raster
    order).

    Args:
        rows: Grid rows.
        cols: Grid columns; ``rows * cols`` must be at least 2.
        composite: Paste the shuffled tiles into one image (Jigsaw-R1) instead of separate images.
        min_tile: Images whose tiles would be smaller than this many pixels on a side are skipped.
        swap: Use a ``cols x rows`` grid instead with probability 1/2 (Jigsaw-R1's ``shuffle_mn``).
        mask_ratio: Black out this fraction of each tile at its borders (Jigsaw-R1's
            ``mask_ratio``), see `tasks.Jigsaw`.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "jigsaw_single"
    parts = ("accuracy",)
    levels = {
        "2x1": {"rows": 2, "cols": 1},
        "3x1": {"rows": 3, "cols": 1},
        "2x2": {"rows": 2, "cols": 2},
        "3x3": {"rows": 3, "cols": 3},
    }

    def __init__(
        self,
        rows: int = 2,
        cols: int = 1,
        composite: bool = True,
        min_tile: int = 14,
        swap: bool = False,
        mask_ratio: float = 0.0,
        **kwargs,
    ):
        super().__init__(
            rows=rows, cols=cols, composite=composite, min_tile=min_tile, swap=swap, mask_ratio=mask_ratio, **kwargs
        )

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        rows, cols, shown, pieces = self.shuffle(item, rng)
        piece = rng.randrange(len(pieces))  # shown position, 0-based
        media, note = self.show(pieces, rows, cols)
        question = (
            f"{self.positions(note, len(pieces))}At which position of the original image does piece {piece + 1} "
            "belong? Answer with that one number."
        )
        meta = {"rows": rows, "cols": cols, "shown": shown, "piece": piece + 1}
        return Example(self.user_message(media, question), shown[piece] + 1, self.name, meta)

    def answer_text(self, example: Example) -> str:
        return str(example.answer)

    def reasoning(self, example: Example) -> str:
        """Where the named piece came from (an SFT demonstration)."""
        cols = example.meta["cols"]
        piece = example.meta["piece"]
        slot = example.answer - 1
        return (
            f"Piece {piece} shows the part at row {slot // cols + 1}, column {slot % cols + 1} of the original "
            f"image, which is position {example.answer}."
        )

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        position = self.parse_answer(example, answer)
        return None if position is None else {"accuracy": float(position == example.answer)}

    def parse_answer(self, example: Example, answer: str) -> int | None:
        """The position (``3`` and ``03`` are one). Digits only, as Jigsaw-R1's format check
        (str.isdigit) wants; a position off the grid is no answer."""
        if not _NUMBER.fullmatch(answer) or not 1 <= int(answer) <= example.meta["rows"] * example.meta["cols"]:
            return None
        return int(answer)
