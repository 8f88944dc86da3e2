"""Shuffled patch reordering (Spatial-SSRL, arXiv 2510.27606; InternLM/Spatial-SSRL
data_process/Shuffle.py).

The patches of a 2x2 grid or of 3-4 strips are shuffled into one composite image, each marked with a
red border and its 0-based shown label (one patch optionally whited out); the answer lists, for each
original position, the label of the patch that belongs there, joined by ``-`` (``2-0-3-1``): the
inverse convention of `tasks.answers`.
"""

from __future__ import annotations

import random
import re

from PIL import Image

from tasks import answers
from tasks.base import Example, Task
from tasks.image import grid
from tasks.order import OrderReward

_GRID = re.compile(r"(\d+)x(\d+)")


def slot_names(rows: int, cols: int) -> str:
    """The answer layout the prompt names: ``TopLeft-TopRight-...``, ``Left-Middle-Right``,
    ``Top-...``."""

    def line(k: int, first: str, last: str) -> list[str]:
        middle = ["Middle"] if k == 3 else [f"Middle{i}" for i in range(1, k - 1)]
        return [first, *middle, last] if k > 1 else [""]

    if rows == 1 or cols == 1:
        return "-".join(line(cols, "Left", "Right") if rows == 1 else line(rows, "Top", "Bottom"))
    return "-".join(f"{r}{c}" for r in line(rows, "Top", "Bottom") for c in line(cols, "Left", "Right"))


class PatchReorder(Task):
    """Shuffle the patches of one of ``grids`` into one image and ask for the arrangement that
    restores it.

    Args:
        grids: Grids to draw from, ``"<rows>x<cols>"`` (Spatial-SSRL: 2x2, the strips 1x3 / 1x4 and
            3x1 / 4x1). As in Spatial-SSRL's prompts, the strips of one row (1x3) are called
            horizontal (they run from left to right), those of one column vertical.
        grid_weights: Relative frequency of each grid; ``None`` draws them equally often.
        mask: Probability that one shown patch of a grid (not of strips) is filled white
            (Spatial-SSRL masks half its 2x2 puzzles and no strips).
        labels: Draw each patch's red border and white 0-based label (Spatial-SSRL) on the
            composite; without them the prompt numbers the patches in raster order of the composite.
        reward: Which graded score is the accuracy: ``"exact"`` (Spatial-SSRL), ``"fraction"`` or
            ``"footrule"``.
        min_tile: Images whose patches would be smaller than this many pixels on a side are skipped.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "patch_reorder"
    modality = "image"
    parts = ("accuracy", *answers.PERMUTATION_SCORES)
    # Spatial-SSRL's mix, then 3x3
    levels = {
        "2x2": {"grids": ["2x2"]},
        "2x2masked": {"grids": ["2x2"], "mask": 1.0},
        "strips4": {"grids": ["1x4", "4x1"]},
        "3x3": {"grids": ["3x3"]},
    }

    def __init__(
        self,
        grids: list[str] = ["2x2"],  # noqa: B006  (never mutated)
        grid_weights: list[float] | None = None,
        mask: float = 0.0,
        labels: bool = True,
        reward: OrderReward = "exact",
        min_tile: int = 14,
        **kwargs,
    ):
        super().__init__(**kwargs)
        matches = [_GRID.fullmatch(g) for g in grids]
        self._grids = [(int(m[1]), int(m[2])) for m in matches if m and int(m[1]) * int(m[2]) >= 2]
        if not grids or len(self._grids) != len(grids) or any(min(g) < 1 for g in self._grids):
            raise ValueError(f"grids must be '<rows>x<cols>' strings with at least two patches, got {grids}")
        if grid_weights is not None and (len(grid_weights) != len(grids) or min(grid_weights) <= 0):
            raise ValueError(f"grid_weights needs one positive weight per grid, got {grid_weights}")
        if not 0 <= mask <= 1:
            raise ValueError(f"mask must be a probability, got {mask}")
        answers.check_permutation_reward(reward, 1.0)
        self.grids = list(grids)
        self.grid_weights = grid_weights
        self.mask = mask
        self.labels = labels
        self.reward = reward
        self.min_tile = min_tile

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        rows, cols = rng.choices(self._grids, weights=self.grid_weights)[0]
        tiles = grid.cut(item.convert("RGB"), rows, cols, self.min_tile)
        shown = list(range(len(tiles)))
        rng.shuffle(shown)
        pieces = [tiles[slot] for slot in shown]
        masked = rng.randrange(len(pieces)) if rows > 1 and cols > 1 and rng.random() < self.mask else None
        if masked is not None:
            pieces[masked] = Image.new("RGB", pieces[masked].size, (255, 255, 255))
        if self.labels:
            pieces = [grid.mark(piece, str(p)) for p, piece in enumerate(pieces)]
        canvas = grid.paste(pieces, rows, cols)
        answer = [label - 1 for label in answers.shuffle_answer(shown)]
        meta = {"rows": rows, "cols": cols, "shown": shown, "masked": masked}
        media = [{"type": "image", "image": canvas}]
        return Example(self.user_message(media, self._question(rows, cols, masked)), answer, self.name, meta)

    def _question(self, rows: int, cols: int, masked: int | None) -> str:
        k = rows * cols
        kind = "patches" if rows > 1 and cols > 1 else ("horizontal" if rows == 1 else "vertical") + " strips"
        labels = ", ".join(str(i) for i in range(k - 1)) + f" and {k - 1}"
        where = "" if self.labels else " in the order they appear, left to right and top to bottom"
        masking = " One of them is masked completely by white pixels." if masked is not None else ""
        return (
            f"The image has been divided into {k} shuffled {kind} labeled {labels}{where}.{masking} Based on "
            "visual clues such as continuity, alignment and context, give the arrangement of the labels that "
            f"restores the original image, in the format '{slot_names(rows, cols)}'."
        )

    def answer_text(self, example: Example) -> str:
        return "-".join(str(label) for label in example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        labels = self.parse_answer(example, answer)
        if labels is None:  # not a permutation of the labels: no credit, no format reward
            return None
        truth = [label + 1 for label in example.answer]
        return answers.graded_permutation([label + 1 for label in labels], truth, self.reward, 1.0)

    def parse_answer(self, example: Example, answer: str) -> tuple[int, ...] | None:
        """The labels in order, when they are a permutation of ``0..k-1`` (``1-0-2`` and ``1, 0, 2``
        are one answer)."""
        k = example.meta["rows"] * example.meta["cols"]
        tokens = re.split(r"\s*[-,]\s*|\s+", answer.strip())
        if not all(t.isdecimal() for t in tokens) or sorted(map(int, tokens)) != list(range(k)):
            return None
        return tuple(int(t) for t in tokens)
