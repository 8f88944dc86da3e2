"""Relative 3D position (Spatial-SSRL, arXiv 2510.27606): stand at one marked region facing a given
way; where is the other? A lettered choice over front / back / left / right, or over the diagonals
when the other region lies diagonally. The answer comes from the regions' positions back-projected
with the depth and intrinsics, heights ignored. Spatial-SSRL faces left, right, towards or away from
the camera with weights 30:30:30:10.
"""

from __future__ import annotations

import math
import random

import numpy as np

from tasks import answers
from tasks.base import Example, SkipItem, Task
from tasks.depth.common import RGBD, back_project, checked, draw_markers, far_apart, flat_pixels, marker_radius

# facing directions as (x, z) unit vectors in the camera's ground plane, and how the prompt names
# them
FACINGS = {
    "left": ((-1.0, 0.0), "towards the left side of the image"),
    "right": ((1.0, 0.0), "towards the right side of the image"),
    "toward": ((0.0, -1.0), "towards the camera"),
    "away": ((0.0, 1.0), "away from the camera, the way it looks"),
}
SECTORS = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]
_TRIES = 200  # random pairs of regions tried before the item is taken as unable to give an example


class RelativePosition3D(Task):
    """Mark two flat regions; ask where one is as seen by someone standing at the other and facing a
    given way.

    Regions are square patches whose normalised depth (0.5th to 99.5th percentile mapped to [0, 1])
    varies by less than ``flatness``. The direction from the observer to the other region in the
    ground plane of the camera (x right, z forward) is measured from the facing direction and falls
    in one of 8 sectors of 45 degrees (front, front-right, ...), or 4 of 90 degrees without
    ``diagonals``. Pairs whose direction lies within ``margin`` degrees of a sector boundary are not
    used, so every answer is clear-cut.

    Args:
        facing_weights: Relative chances of facing left, right, towards the camera, away from the
            camera.
        diagonals: Allow diagonal answers: the options are the four diagonals when the answer is
            one, else front, back, left and right.
        margin: Degrees kept clear of every sector boundary.
        min_separation: Least ground-plane distance between the regions, as a fraction of their mean
            depth.
        patch: Side of a region as a fraction of the image's shorter side.
        flatness: Most a region's normalised depth may vary.
        marker_size: Marker radius as a fraction of the image's shorter side (at least 6 pixels).
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "relative_position_3d"
    modality = "rgbd"
    parts = ("accuracy",)
    levels = {"4way": {"diagonals": False}, "8way": {"diagonals": True}}

    def __init__(
        self,
        facing_weights: list[float] = [3.0, 3.0, 3.0, 1.0],  # noqa: B006  (never mutated)
        diagonals: bool = True,
        margin: float = 10.0,
        min_separation: float = 0.2,
        patch: float = 0.02,
        flatness: float = 0.15,
        marker_size: float = 0.03,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if len(facing_weights) != 4 or min(facing_weights) < 0 or sum(facing_weights) <= 0:
            raise ValueError(f"facing_weights must be 4 weights >= 0 with a positive sum, got {facing_weights}")
        width = 45.0 if diagonals else 90.0
        if not 0 <= margin < width / 2:
            raise ValueError(f"margin must be in [0, {width / 2}) degrees, got {margin}")
        if min_separation < 0:
            raise ValueError(f"min_separation must be >= 0, got {min_separation}")
        if not 0 < patch < 0.5:
            raise ValueError(f"patch must be in (0, 0.5), got {patch}")
        if flatness <= 0:
            raise ValueError(f"flatness must be > 0, got {flatness}")
        if not 0 < marker_size < 0.25:
            raise ValueError(f"marker_size must be in (0, 0.25), got {marker_size}")
        self.facing_weights = list(facing_weights)
        self.diagonals = diagonals
        self.margin = margin
        self.min_separation = min_separation
        self.patch = patch
        self.flatness = flatness
        self.marker_size = marker_size

    def make_example(self, item: RGBD, rng: random.Random) -> Example:
        rgb, depth, intrinsics = checked(item, need_intrinsics=True)
        radius = marker_radius(rgb, self.marker_size)
        _, flat = flat_pixels(depth, self.patch, self.flatness, radius)
        facing = rng.choices(list(FACINGS), weights=self.facing_weights)[0]
        observer = rng.randint(1, 2)  # the label of the region the observer stands at
        for _ in range(_TRIES if len(flat) >= 2 else 0):
            points = [tuple(int(c) for c in flat[i][::-1]) for i in rng.sample(range(len(flat)), 2)]
            if not far_apart(points[0], points[1:], 2 * radius + 2):
                continue
            positions = back_project(
                np.array(points), depth[[v for _, v in points], [u for u, _ in points]], intrinsics
            )  # [2, 3]
            relation = self.relation(positions[observer - 1], positions[2 - observer], facing)
            if relation is not None:
                break
        else:
            raise SkipItem(f"{item.name or 'rgbd'}: no two of {len(flat)} flat pixels give a clear-cut direction")
        options = self._options(relation)
        rng.shuffle(options)
        meta = {
            "points": [list(p) for p in points],
            "positions": np.round(positions, 4).tolist(),
            "observer": observer,
            "facing": facing,
            "options": options,
        }
        media = [{"type": "image", "image": draw_markers(rgb, points, radius)}]
        return Example(self.user_message(media, self._question(observer, facing, options)), relation, self.name, meta)

    def relation(self, observer: np.ndarray, other: np.ndarray, facing: str) -> str | None:
        """The sector in which ``other`` lies for someone at ``observer`` (camera-frame ``[3]``
        positions) facing ``facing``; None when too close, or too near a sector boundary."""
        dx = other[0] - observer[0]
        dz = other[2] - observer[2]
        if math.hypot(dx, dz) < self.min_separation * (observer[2] + other[2]) / 2:
            return None
        fx, fz = FACINGS[facing][0]
        front, right = dx * fx + dz * fz, dx * fz - dz * fx  # seen from above, right is the facing turned clockwise
        width = 45.0 if self.diagonals else 90.0
        steps = math.degrees(math.atan2(right, front)) / width  # sectors clockwise from straight ahead
        if abs(steps - round(steps)) * width > width / 2 - self.margin:
            return None
        return SECTORS[round(steps) * round(width / 45) % 8]

    def _options(self, relation: str) -> list[str]:
        diagonal = SECTORS.index(relation) % 2
        return [s for i, s in enumerate(SECTORS) if i % 2 == diagonal]

    def _question(self, observer: int, facing: str, options: list[str]) -> str:
        return (
            f"Two regions of this image are marked 1 and 2. Imagine standing at region {observer} and facing "
            f"{FACINGS[facing][1]}. Ignoring any difference in height, where is region {3 - observer} from "
            f"you?\n{answers.choice_prompt(options)}"
        )

    def answer_text(self, example: Example) -> str:
        return answers.letter(example.meta["options"].index(example.answer))

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        chosen = answers.parse_letter(answer, example.meta["options"], self.strict_letters)
        return None if chosen is None else {"accuracy": float(chosen == example.answer)}
