"""Point-cloud jigsaw: cut a cloud into slabs along an axis, shuffle them, ask for the original
order.

The 3D counterpart of Visual Jigsaw (arXiv 2509.25190), in the permutation convention of
`tasks.answers`. Each slab holds the same number of points and is re-centred on its own centroid, so
neither its size nor its position gives the order away: only the shapes of the cut faces and of the
object do.
"""

from __future__ import annotations

import random
from typing import Literal

import numpy as np

from tasks import answers
from tasks.base import Example
from tasks.order import OrderReward, OrderTask
from tasks.pointcloud.common import AXES, PointCloud, cloud_part, normalize, points_of


def cut_slabs(points: np.ndarray, k: int, axis: str) -> list[np.ndarray]:
    """``k`` slabs of (nearly) equal point counts, in increasing order along ``axis``."""
    order = np.argsort(points[:, AXES[axis]], kind="stable")
    return [points[idx] for idx in np.array_split(order, k)]


class PointCloudJigsaw(OrderTask):
    """Cut a cloud into ``num_slabs`` slabs along ``axis``, show them shuffled, ask for their order.

    Args:
        num_slabs: Number of slabs (K >= 2).
        axis: The axis the cuts are perpendicular to (``x``, ``y``, ``z``); the answer lists the
            slabs from the lowest coordinate to the highest (bottom to top for ``z``).
        reward: Which graded score is the accuracy (see `tasks.OrderTask`).
        partial_credit: Scale of the graded accuracy of a valid but wrong order; an exact order
            earns 1.
        render: Show each slab as a depth-coloured front-view image instead of points.
        image_size: Side of each rendered image, in pixels.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "pointcloud_jigsaw"
    modality = "point_cloud"
    levels = {f"{k}slabs": {"num_slabs": k} for k in (2, 3, 4)}

    def __init__(
        self,
        num_slabs: int = 3,
        axis: Literal["x", "y", "z"] = "z",
        reward: OrderReward = "fraction",
        partial_credit: float = 1.0,
        render: bool = False,
        image_size: int = 112,
        **kwargs,
    ):
        super().__init__(reward=reward, partial_credit=partial_credit, **kwargs)
        if num_slabs < 2:
            raise ValueError(f"num_slabs must be >= 2, got {num_slabs}")
        if axis not in AXES:
            raise ValueError(f"axis must be one of {sorted(AXES)}, got {axis!r}")
        if image_size < 16:
            raise ValueError(f"image_size must be >= 16 pixels, got {image_size}")
        self.num_slabs = num_slabs
        self.axis = axis
        self.render = render
        self.image_size = image_size

    def make_example(self, item: PointCloud, rng: random.Random) -> Example:
        slabs = cut_slabs(normalize(points_of(item, min_points=2 * self.num_slabs)), self.num_slabs, self.axis)
        shown = list(range(self.num_slabs))
        rng.shuffle(shown)
        centres = [slabs[slot][:, :3].mean(0) for slot in shown]
        media = [
            {
                "type": "text",
                "text": f"These {self.num_slabs} point clouds are slabs of one object cut "
                f"perpendicular to its {self.axis} axis, each moved to the origin, "
                f"shuffled and numbered in the order shown.\n",
            }
        ]
        for i, (slot, centre) in enumerate(zip(shown, centres, strict=True), start=1):
            slab = slabs[slot].copy()
            slab[:, :3] -= centre
            media += [{"type": "text", "text": f"Slab {i}:"}, cloud_part(slab, self.render, self.image_size)]
        question = (
            f"Reassemble the object. From the lowest {self.axis} to the highest, give the number of the "
            f"slab that belongs at each place: {self.num_slabs} numbers separated by commas."
        )
        meta = {
            "num_slabs": self.num_slabs,
            "axis": self.axis,
            "shown": shown,
            "centres": [c.round(6).tolist() for c in centres],
        }
        return Example(self.user_message(media, question), answers.shuffle_answer(shown), self.name, meta)
