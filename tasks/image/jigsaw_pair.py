"""Jigsaw pair questions: where was one shuffled tile relative to another in the original image?

Follows the ``pair`` question of Jigsaw-R1 (arXiv 2505.23590; zifuwanggg/Jigsaw-R1
utils/jigsaw_utils.py): the tiles of an ``m x n`` grid are shuffled and pasted back into one image;
two shown positions are named and the policy picks their original relation among 2 options (one-row
or one-column grids) or 8 directions.
"""

from __future__ import annotations

import random

from PIL import Image

from tasks import answers
from tasks.base import Example, Task
from tasks.image.jigsaw import Jigsaw

# (sign of row offset, sign of column offset) of the first tile relative to the second -> relation
_RELATIONS = {
    (-1, 0): "directly above",
    (1, 0): "directly below",
    (0, -1): "directly left of",
    (0, 1): "directly right of",
    (-1, -1): "above and to the left of",
    (-1, 1): "above and to the right of",
    (1, -1): "below and to the left of",
    (1, 1): "below and to the right of",
}


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _options(rows: int, cols: int) -> list[str]:
    """Left / right for one row, above / below for one column, else the 8 directions."""
    if rows == 1:
        return [_RELATIONS[0, -1], _RELATIONS[0, 1]]
    if cols == 1:
        return [_RELATIONS[-1, 0], _RELATIONS[1, 0]]
    return list(_RELATIONS.values())


class JigsawPair(Jigsaw):
    """Shuffle the tiles of a ``rows x cols`` grid, name two of them by their shown position, and
    ask how the first lay relative to the second in the original image (a lettered multiple choice).

    Args:
        rows: Grid rows.
        cols: Grid columns; ``rows * cols`` must be at least 2. A one-row grid has the options left
            / right, a one-column grid above / below, any other grid the 8 directions.
        composite: Paste the shuffled tiles into one image (Jigsaw-R1) instead of separate images.
        min_tile: Images whose tiles would be smaller than this many pixels on a side are skipped.
        swap: Use a ``cols x rows`` grid instead with probability 1/2 (Jigsaw-R1's ``shuffle_mn``).
        mask_ratio: Black out this fraction of each tile at its borders (Jigsaw-R1's
            ``mask_ratio``), see `tasks.Jigsaw`.
        shuffle_options: List the options in a random order per example (Jigsaw-R1), so a letter
            does not stand for one relation; else in a fixed order (left before right, above before
            below).
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "jigsaw_pair"
    parts = ("accuracy",)
    levels = {
        "2x1": {"rows": 2, "cols": 1},
        "3x1": {"rows": 3, "cols": 1},
        "2x2": {"rows": 2, "cols": 2},
        "3x3": {"rows": 3, "cols": 3},
    }  # Jigsaw-R1: 2x1 learned, 3x1 transfers, 2x2 does not

    def __init__(
        self,
        rows: int = 2,
        cols: int = 1,
        composite: bool = True,
        min_tile: int = 14,
        swap: bool = False,
        mask_ratio: float = 0.0,
        shuffle_options: bool = False,
        **kwargs,
    ):
        super().__init__(
            rows=rows, cols=cols, composite=composite, min_tile=min_tile, swap=swap, mask_ratio=mask_ratio, **kwargs
        )
        self.shuffle_options = shuffle_options

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        rows, cols, shown, pieces = self.shuffle(item, rng)
        first, second = rng.sample(range(len(pieces)), 2)  # shown positions, 0-based
        media, note = self.show(pieces, rows, cols)
        options = _options(rows, cols)
        if self.shuffle_options:
            rng.shuffle(options)
        (r1, c1), (r2, c2) = divmod(shown[first], cols), divmod(shown[second], cols)
        relation = _RELATIONS[_sign(r1 - r2), _sign(c1 - c2)]
        texts = [f"{first + 1} is {option} {second + 1}" for option in options]
        question = (
            f"In the original image, where was piece {first + 1} relative to piece {second + 1}?\n"
            f"{answers.choice_prompt(texts)}"
        )
        meta = {"rows": rows, "cols": cols, "shown": shown, "pair": [first + 1, second + 1], "options": options}
        text = f"{note}\n{question}" if note else question
        return Example(self.user_message(media, text), relation, self.name, meta)

    def answer_text(self, example: Example) -> str:
        return answers.letter(example.meta["options"].index(example.answer))

    def reasoning(self, example: Example) -> str:
        """Where both named pieces came from, then their relation (an SFT demonstration)."""
        cols, (first, second) = example.meta["cols"], example.meta["pair"]
        (r1, c1), (r2, c2) = (divmod(example.meta["shown"][piece - 1], cols) for piece in (first, second))
        return (
            f"Piece {first} comes from row {r1 + 1}, column {c1 + 1} of the original image and piece {second} "
            f"from row {r2 + 1}, column {c2 + 1}, so piece {first} is {example.answer} piece {second}."
        )

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        relation = answers.parse_letter(answer, example.meta["options"], self.strict_letters)
        return None if relation is None else {"accuracy": float(relation == example.answer)}

    def parse_answer(self, example: Example, answer: str) -> str | None:
        """The letter, as in any lettered question (`tasks.Task.parse_answer`), not the order of a
        jigsaw: the options may differ from question to question, and one letter given to every
        question must show as one answer."""
        return Task.parse_answer(self, example, answer)
