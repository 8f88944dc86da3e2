"""Point-cloud rotation prediction: which rotation turned an upright object? The 3D analogue of
image rotation prediction (SSL4RL, arXiv 2510.16416): upright is learnable from the data because
objects (ModelNet, ShapeNet, `datamodules.SyntheticPointClouds`) are stored standing on their base
with +z up.
"""

from __future__ import annotations

import random
import re

import numpy as np

from tasks import answers
from tasks.base import Example, Task
from tasks.pointcloud.common import PointCloud, cloud_part, normalize, points_of, rotate, rotation_matrix

_SPEC = re.compile(r"(?P<axis>[xyz])(?P<angle>\d+)")


def parse_rotation(spec: str) -> tuple[str, int] | None:
    """``"x90"`` -> ``("x", 90)``; ``"none"`` -> None (the identity)."""
    if spec == "none":
        return None
    match = _SPEC.fullmatch(spec)
    if not match or int(match["angle"]) % 360 == 0:
        raise ValueError(f"a rotation is 'none' or an axis and a non-zero angle such as 'x90', got {spec!r}")
    return match["axis"], int(match["angle"]) % 360


def describe(spec: str) -> str:
    """The option text of a rotation, e.g. ``90 degrees about the x axis``."""
    parsed = parse_rotation(spec)
    return "no rotation" if parsed is None else f"{parsed[1]} degrees about the {parsed[0]} axis"


def matrix_of(spec: str) -> np.ndarray:
    """The ``[3, 3]`` matrix of a rotation spec."""
    parsed = parse_rotation(spec)
    return np.eye(3) if parsed is None else rotation_matrix(*parsed)


class PointCloudRotation(Task):
    """Rotate an upright point cloud (about its centroid) by one of a set of rotations; ask which
    one, as a lettered multiple choice.

    Args:
        rotations: The options: ``"none"`` or an axis and an angle in degrees counter-clockwise
            (right-hand rule), e.g. ``"x90"``. The default six move the up direction to six
            different directions, so the answer follows from where the object's base ends up;
            rotations about z alone need objects with a recognisable front.
        render: Show a depth-coloured front-view image (`tasks.pointcloud.common.render_depth`)
            instead of the points, so image policies can take the task.
        image_size: Side of the rendered image, in pixels.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "pointcloud_rotation"
    modality = "point_cloud"
    parts = ("accuracy",)
    levels = {"4way": {"rotations": ["none", "x90", "x180", "x270"]}, "6way": {}}

    def __init__(
        self,
        rotations: list[str] = ["none", "x90", "x180", "x270", "y90", "y270"],  # noqa: B006  (never mutated)
        render: bool = False,
        image_size: int = 112,
        **kwargs,
    ):
        super().__init__(**kwargs)
        matrices = [matrix_of(spec) for spec in rotations]
        distinct = {m.round(6).tobytes() for m in matrices}
        if len(rotations) < 2 or len(distinct) != len(rotations) or len(rotations) > 26:
            raise ValueError(f"rotations must be 2 to 26 different rotations, got {rotations}")
        if image_size < 16:
            raise ValueError(f"image_size must be >= 16 pixels, got {image_size}")
        self.rotations = list(rotations)
        self.render = render
        self.image_size = image_size

    def make_example(self, item: PointCloud, rng: random.Random) -> Example:
        points = normalize(points_of(item, min_points=4))
        spec = rng.choice(self.rotations)
        turned = rotate(points, matrix_of(spec))
        noun = "image shows a point cloud" if self.render else "point cloud shows an object"
        question = (
            f"This {noun} that stood upright (+z up) and was then rotated about its centre. "
            f"Which rotation was applied?\n{answers.choice_prompt([describe(r) for r in self.rotations])}"
        )
        media = [cloud_part(turned, self.render, self.image_size)]
        meta = {"rotation": spec, "choices": list(self.rotations)}
        return Example(self.user_message(media, question), spec, self.name, meta)

    def answer_text(self, example: Example) -> str:
        return answers.letter(example.meta["choices"].index(example.answer))

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        chosen = answers.parse_letter(answer, example.meta["choices"], self.strict_letters)
        if chosen is None:
            return None
        return {"accuracy": float(chosen == example.answer)}
