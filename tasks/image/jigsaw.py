"""Image jigsaw: cut an image into a grid, shuffle the tiles, ask for the original order.

Follows Visual Jigsaw (arXiv 2509.25190: separate tiles, raster-order answer) and Jigsaw-R1 (arXiv
2505.23590: tiles pasted into one image, partial credit, masked borders, neighbour reward), in the
permutation convention of `tasks.answers`.
"""

from __future__ import annotations

import random
from typing import Literal

from PIL import Image

from tasks import answers
from tasks.base import Example
from tasks.image import grid
from tasks.order import OrderTask

REWARDS = (*answers.PERMUTATION_SCORES, "connections")


class Jigsaw(OrderTask):
    """Shuffle the tiles of a ``rows x cols`` grid and ask which piece belongs in each original
    position.

    Args:
        rows: Grid rows.
        cols: Grid columns; ``rows * cols`` must be at least 2.
        composite: Paste the shuffled tiles into one image (Jigsaw-R1) instead of showing each tile
            as a separate image (Visual Jigsaw, SSL4RL).
        reward: Which graded score is the accuracy: ``"exact"``, ``"fraction"``, ``"footrule"`` (see
            `tasks.OrderTask`) or ``"connections"`` (share of the original neighbour pairs the
            answer keeps side by side, Jigsaw-R1's optional adjacency reward; see
            `tasks.image.grid.neighbour_accuracy`). All four are logged.
        min_tile: Images whose tiles would be smaller than this many pixels on a side are skipped.
        partial_credit: Scale of the graded accuracy of a valid but wrong order (Visual Jigsaw uses
            0.2 with ``fraction``); an exact order always earns 1.
        swap: Use a ``cols x rows`` grid instead with probability 1/2 (Jigsaw-R1's ``shuffle_mn``).
        mask_ratio: Black out this fraction of each tile at its borders (Jigsaw-R1's ``mask_ratio``,
            0 by default): at the composite's outer edges, half of it on either side of an inner
            seam; all round a separate tile. Below 0.5.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "jigsaw"
    modality = "image"
    parts = ("accuracy", *REWARDS)
    rewards = REWARDS
    levels = {f"{k}x{k}": {"rows": k, "cols": k} for k in (2, 3, 4)}  # Visual Jigsaw trains 3x3, SSL4RL 2x2

    def __init__(
        self,
        rows: int = 2,
        cols: int = 2,
        composite: bool = False,
        reward: Literal["exact", "fraction", "footrule", "connections"] = "fraction",
        min_tile: int = 14,
        partial_credit: float = 1.0,
        swap: bool = False,
        mask_ratio: float = 0.0,
        **kwargs,
    ):
        super().__init__(reward=reward, partial_credit=partial_credit, **kwargs)
        if rows < 1 or cols < 1 or rows * cols < 2:
            raise ValueError(f"need rows, cols >= 1 and at least two tiles, got {rows}x{cols}")
        if min_tile < 1:
            raise ValueError(f"min_tile must be >= 1, got {min_tile}")
        if not 0 <= mask_ratio < 0.5:
            raise ValueError(f"mask_ratio must be in [0, 0.5), got {mask_ratio}")
        self.rows = rows
        self.cols = cols
        self.composite = composite
        self.min_tile = min_tile
        self.swap = swap
        self.mask_ratio = mask_ratio

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        rows, cols, shown, pieces = self.shuffle(item, rng)
        media, note = self.show(pieces, rows, cols)
        question = f"{note}\n{self._ask(len(pieces))}" if note else self._ask(len(pieces))
        meta = {"rows": rows, "cols": cols, "shown": shown}
        return Example(self.user_message(media, question), answers.shuffle_answer(shown), self.name, meta)

    def shuffle(self, item: Image.Image, rng: random.Random) -> tuple[int, int, list[int], list[Image.Image]]:
        """The grid (transposed with probability 1/2 under ``swap``), the display order
        (``shown[p]`` is the original slot of the piece shown at position p) and the pieces in that
        order."""
        rows, cols = (self.cols, self.rows) if self.swap and rng.random() < 0.5 else (self.rows, self.cols)
        tiles = grid.cut(item.convert("RGB"), rows, cols, self.min_tile)
        shown = list(range(len(tiles)))
        rng.shuffle(shown)
        return rows, cols, shown, [tiles[slot] for slot in shown]

    def show(self, pieces: list[Image.Image], rows: int, cols: int) -> tuple[list[dict], str]:
        """The media parts showing the shuffled pieces of a ``rows x cols`` grid, and a note for the
        question (how they are numbered)."""
        return self._composite(pieces, rows, cols) if self.composite else self._separate(pieces, rows, cols)

    def _separate(self, pieces: list[Image.Image], rows: int, cols: int) -> tuple[list[dict], str]:
        intro = (
            f"These {len(pieces)} images are the pieces of one image cut into a grid of {grid.grid_name(rows, cols)}, "
            f"shuffled and numbered 1 to {len(pieces)} in the order shown.\n"
        )
        media = [{"type": "text", "text": intro}]
        for i, piece in enumerate(pieces, start=1):
            media += [{"type": "text", "text": f"Piece {i}:"}, {"type": "image", "image": self._masked(piece, 1, 1)}]
        return media, ""

    def _composite(self, pieces: list[Image.Image], rows: int, cols: int) -> tuple[list[dict], str]:
        canvas = self._masked(grid.paste(pieces, rows, cols), rows, cols)
        masked = " The borders of every piece are blacked out." if self.mask_ratio else ""
        intro = (
            f"This image was cut into equal pieces on a grid of {grid.grid_name(rows, cols)}, then they were shuffled."
            f"{masked} Number the pieces as they appear here from 1 to {len(pieces)}, left to right, top to bottom."
        )
        return [{"type": "image", "image": canvas}], intro

    def _masked(self, image: Image.Image, rows: int, cols: int) -> Image.Image:
        return grid.mask_borders(image, rows, cols, self.mask_ratio) if self.mask_ratio else image

    @staticmethod
    def positions(note: str, k: int) -> str:
        """The note on how the shown pieces are numbered, then how the original image's positions
        are."""
        lead = f"{note}\n" if note else ""
        return f"{lead}The positions of the original image are numbered 1 to {k}, left to right, top to bottom. "

    @staticmethod
    def _ask(k: int) -> str:
        return (
            "Reassemble the original image. For each position of the original image, left to right and top "
            f"to bottom, give the number of the piece that belongs there: {k} numbers separated by commas."
        )

    def graded(self, pred: list[int], example: Example) -> dict[str, float]:
        connections = grid.neighbour_accuracy(pred, example.answer, example.meta["rows"], example.meta["cols"])
        return super().graded(pred, example) | {"connections": connections}

    def reasoning(self, example: Example) -> str:
        """Which shown piece each original position takes, position by position (an SFT
        demonstration)."""
        cols, shown = example.meta["cols"], example.meta["shown"]  # shown[p]: original slot of shown piece p
        steps = [
            f"position {slot + 1} (row {slot // cols + 1}, column {slot % cols + 1}) takes piece "
            f"{shown.index(slot) + 1}"
            for slot in range(len(shown))
        ]
        return "In the original image " + "; ".join(steps) + "."
