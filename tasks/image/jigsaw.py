"""Image jigsaw: cut an image into a grid, shuffle the tiles, ask for the original order.

Follows Visual Jigsaw (arXiv 2509.25190: separate tiles, raster-order answer) and Jigsaw-R1 (arXiv 2505.23590:
tiles pasted into one image, partial credit), in the permutation convention of `tasks.answers`.
"""

from __future__ import annotations

import random
from typing import Literal

from PIL import Image

from tasks import answers
from tasks.base import Example, Task
from tasks.image import grid


class Jigsaw(Task):
    """Shuffle the tiles of a ``rows x cols`` grid and ask which piece belongs in each original position.

    Args:
        rows: Grid rows.
        cols: Grid columns; ``rows * cols`` must be at least 2.
        composite: Paste the shuffled tiles into one image (Jigsaw-R1) instead of showing each tile as a
            separate image (Visual Jigsaw, SSL4RL).
        reward: Which graded score is the accuracy: ``"exact"`` (whole order right), ``"fraction"`` (share
            of positions right) or ``"footrule"`` (1 - normalised Spearman footrule distance). All three are
            logged.
        min_tile: Images whose tiles would be smaller than this many pixels on a side are skipped.
        partial_credit: Scale of the graded accuracy of a valid but wrong order (Visual Jigsaw uses 0.2 with
            ``fraction``); an exact order always earns 1.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "jigsaw"
    modality = "image"
    parts = ("accuracy", *answers.PERMUTATION_SCORES)

    def __init__(
        self,
        rows: int = 2,
        cols: int = 2,
        composite: bool = False,
        reward: Literal["exact", "fraction", "footrule"] = "fraction",
        min_tile: int = 14,
        partial_credit: float = 1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if rows < 1 or cols < 1 or rows * cols < 2:
            raise ValueError(f"need rows, cols >= 1 and at least two tiles, got {rows}x{cols}")
        answers.check_permutation_reward(reward, partial_credit)
        if min_tile < 1:
            raise ValueError(f"min_tile must be >= 1, got {min_tile}")
        self.rows, self.cols = rows, cols
        self.composite = composite
        self.reward = reward
        self.min_tile = min_tile
        self.partial_credit = partial_credit

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        tiles = grid.cut(item.convert("RGB"), self.rows, self.cols, self.min_tile)
        shown = list(range(len(tiles)))
        rng.shuffle(shown)
        pieces = [tiles[slot] for slot in shown]
        media, note = self._show(pieces, self.rows, self.cols)
        question = f"{note}\n{self._ask(len(pieces))}" if note else self._ask(len(pieces))
        meta = {"rows": self.rows, "cols": self.cols, "shown": shown}
        return Example(self.user_message(media, question), answers.shuffle_answer(shown), self.name, meta)

    def _show(self, pieces: list[Image.Image], rows: int, cols: int) -> tuple[list[dict], str]:
        """The media parts showing the shuffled pieces of a ``rows x cols`` grid, and a note for the question
        (how they are numbered)."""
        return self._composite(pieces, rows, cols) if self.composite else self._separate(pieces, rows, cols)

    @staticmethod
    def _separate(pieces: list[Image.Image], rows: int, cols: int) -> tuple[list[dict], str]:
        intro = (
            f"These {len(pieces)} images are the pieces of one image cut into a grid of {grid.grid_name(rows, cols)}, "
            f"shuffled and numbered 1 to {len(pieces)} in the order shown.\n"
        )
        media = [{"type": "text", "text": intro}]
        for i, piece in enumerate(pieces, start=1):
            media += [{"type": "text", "text": f"Piece {i}:"}, {"type": "image", "image": piece}]
        return media, ""

    @staticmethod
    def _composite(pieces: list[Image.Image], rows: int, cols: int) -> tuple[list[dict], str]:
        canvas = grid.paste(pieces, rows, cols)
        intro = (
            f"This image was cut into equal pieces on a grid of {grid.grid_name(rows, cols)}, then they were shuffled. "
            f"Number the pieces as they appear here from 1 to {len(pieces)}, left to right, top to bottom."
        )
        return [{"type": "image", "image": canvas}], intro

    @staticmethod
    def _ask(k: int) -> str:
        return (
            "Reassemble the original image. For each position of the original image, left to right and top "
            f"to bottom, give the number of the piece that belongs there: {k} numbers separated by commas."
        )

    def answer_text(self, example: Example) -> str:
        return ", ".join(str(label) for label in example.answer)

    def reasoning(self, example: Example) -> str:
        """Which shown piece each original position takes, position by position (an SFT demonstration)."""
        cols = example.meta["cols"]
        steps = [f"position {slot + 1} (row {slot // cols + 1}, column {slot % cols + 1}) takes piece {label}"
                 for slot, label in enumerate(example.answer)]
        return "In the original image " + "; ".join(steps) + "."

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        pred = answers.parse_permutation(answer, example.meta["rows"] * example.meta["cols"])
        # a non-permutation earns nothing, or repeating one label would collect partial credit
        if pred is None:
            return None
        return answers.graded_permutation(pred, example.answer, self.reward, self.partial_credit)
