"""Jigsaw multiple-choice questions: which candidate arrangement solves the shuffled grid?

Follows the ``multiple`` question of Jigsaw-R1 (arXiv 2505.23590; zifuwanggg/Jigsaw-R1
utils/jigsaw_utils.py, utils/prompt.py): the tiles of an ``m x n`` grid are shuffled into one image
and ``choices`` candidate grids are listed, each giving, at every shown position, the original
position of the piece there (Jigsaw-R1's forward convention); one is right, the others are distinct
random permutations.
"""

from __future__ import annotations

import itertools
import math
import random

from PIL import Image

from tasks import answers
from tasks.base import Example, Task
from tasks.image.jigsaw import Jigsaw

_ENUMERATE = 6  # grids of up to 6 pieces draw distractors from all 720 orders; larger ones by rejection


def grid_text(order: list[int], cols: int) -> str:
    """An arrangement written as a grid: one line per row, numbers separated by spaces."""
    return "\n".join(" ".join(str(v) for v in order[i : i + cols]) for i in range(0, len(order), cols))


def distractors(truth: list[int], n: int, rng: random.Random) -> list[list[int]]:
    """``n`` distinct orders of the labels of ``truth``, none equal to it."""
    k = len(truth)
    if k <= _ENUMERATE:
        others = [list(order) for order in itertools.permutations(range(1, k + 1)) if list(order) != truth]
        return rng.sample(others, n)
    chosen: list[list[int]] = []
    while len(chosen) < n:
        order = rng.sample(range(1, k + 1), k)
        if order != truth and order not in chosen:
            chosen.append(order)
    return chosen


class JigsawMultiple(Jigsaw):
    """Shuffle the tiles of a ``rows x cols`` grid into one image, list ``choices`` candidate
    solutions as grids of original positions, and ask for the letter of the right one.

    Args:
        rows: Grid rows.
        cols: Grid columns; ``(rows * cols)!`` must be at least ``choices``.
        choices: Candidate grids listed (Jigsaw-R1's ``n_c``, 4), one right, at most 26.
        composite: Paste the shuffled tiles into one image (Jigsaw-R1) instead of separate images.
        min_tile: Images whose tiles would be smaller than this many pixels on a side are skipped.
        swap: Use a ``cols x rows`` grid instead with probability 1/2 (Jigsaw-R1's ``shuffle_mn``).
        mask_ratio: Black out this fraction of each tile at its borders (Jigsaw-R1's
            ``mask_ratio``), see `tasks.Jigsaw`.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "jigsaw_multiple"
    parts = ("accuracy",)
    levels = {"2x1": {"rows": 2, "cols": 1, "choices": 2}, "3x1": {"rows": 3, "cols": 1}, "2x2": {"rows": 2, "cols": 2}}

    def __init__(
        self,
        rows: int = 2,
        cols: int = 2,
        choices: int = 4,
        composite: bool = True,
        min_tile: int = 14,
        swap: bool = False,
        mask_ratio: float = 0.0,
        **kwargs,
    ):
        super().__init__(
            rows=rows, cols=cols, composite=composite, min_tile=min_tile, swap=swap, mask_ratio=mask_ratio, **kwargs
        )
        if not 2 <= choices <= min(26, math.factorial(rows * cols)):
            raise ValueError(f"choices must be in [2, min(26, {rows * cols}!)], got {choices}")
        self.choices = choices

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        rows, cols, shown, pieces = self.shuffle(item, rng)
        truth = [slot + 1 for slot in shown]  # at each shown position, the original position of its piece
        options = distractors(truth, self.choices - 1, rng)
        options.insert(rng.randrange(self.choices), truth)
        media, note = self.show(pieces, rows, cols)
        listed = "\n\n".join(f"({answers.letter(i)})\n{grid_text(o, cols)}" for i, o in enumerate(options))
        question = (
            f"{self.positions(note, len(pieces))}Each option is a grid whose numbers, read left to right and top to "
            "bottom, give for piece 1, piece 2, ... the position it belongs at in the original image. Which option "
            f"is right?\n\n{listed}\n\nAnswer with the letter of the correct option."
        )
        meta = {"rows": rows, "cols": cols, "shown": shown, "options": options}
        return Example(self.user_message(media, question), truth, self.name, meta)

    def answer_text(self, example: Example) -> str:
        return answers.letter(example.meta["options"].index(example.answer))

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        chosen = answers.parse_letter(answer, example.meta["options"], self.strict_letters)
        return None if chosen is None else {"accuracy": float(chosen == example.answer)}

    def parse_answer(self, example: Example, answer: str) -> str | None:
        """The letter, as in any lettered question (`tasks.Task.parse_answer`), not the order of a
        jigsaw: the options differ from question to question, and one letter given to every
        question must show as one answer."""
        return Task.parse_answer(self, example, answer)
