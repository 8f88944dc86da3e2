"""Depth ordering of marked points (Visual Jigsaw 3D, arXiv 2509.25190): numbered markers on the RGB
image, the answer lists them from nearest to farthest. Visual Jigsaw uses 6 points 0.1-10 m deep, >=
40 px apart (of 480) and > 0.2 m apart in depth, on ScanNet.
"""

from __future__ import annotations

import random

import numpy as np

from tasks.base import SkipItem
from tasks.depth.common import DepthOrdering, far_apart, inner_pixels, neighbour_step

_TRIES = 500  # candidate pixels looked at in one greedy pass
_RESTARTS = 10  # greedy passes before the item is taken as unable to hold the points


class DepthOrder(DepthOrdering):
    """Mark ``points`` pixels of known depth and ask for their order from nearest to farthest.

    A pixel qualifies when its depth lies in ``depth_range`` and its 4 neighbours are valid and
    differ from it by less than half of ``min_gap`` (so the marker's centre is not on a depth edge).
    Points are drawn at random among those, pairwise at least ``min_distance`` apart in the image
    and ``min_gap`` apart in depth.

    Args:
        points: Number of marked points, 2 to 9.
        min_distance: Least distance between two points, as a fraction of the image's shorter side
            (and never less than two marker radii, so markers do not overlap).
        min_gap: Least depth difference between two points, in metres.
        depth_range: Depths ``(nearest, farthest)`` a point may have, in metres.
        **kwargs: Marker and reward options (see `tasks.depth.common.DepthOrdering`) and answer
            format options (see `tasks.Task`).
    """

    name = "depth_order"
    levels = {f"{k}points": {"points": k} for k in (2, 3, 4, 6)}  # Visual Jigsaw 3D orders 6 points

    def __init__(
        self,
        points: int = 6,
        min_distance: float = 0.08,
        min_gap: float = 0.2,
        depth_range: tuple[float, float] = (0.1, 10.0),
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 2 <= points <= 9:
            raise ValueError(f"points must be in 2..9, got {points}")
        if min_distance < 0 or min_gap <= 0:
            raise ValueError(f"min_distance must be >= 0 and min_gap > 0, got {min_distance}, {min_gap}")
        if not 0 <= depth_range[0] < depth_range[1]:
            raise ValueError(f"depth_range must be (nearest, farthest) with 0 <= nearest < farthest, got {depth_range}")
        self.check_style(points)
        self.points = points
        self.min_distance = min_distance
        self.min_gap = min_gap
        self.depth_range = tuple(depth_range)

    def pick(
        self, rgb: np.ndarray, depth: np.ndarray, radius: int, rng: random.Random, name: str
    ) -> list[tuple[int, int]]:
        candidates = self._candidates(depth, radius)
        if len(candidates) < self.points:
            raise SkipItem(f"{name}: {len(candidates)} pixels of usable depth, need {self.points} points")
        spacing = max(self.min_distance * min(depth.shape), 2 * radius + 2)
        found = 0
        for _ in range(_RESTARTS):  # a greedy pass can block itself; passes over fresh orders rarely all do
            chosen = self._greedy(candidates, depth, spacing, rng)
            if len(chosen) == self.points:
                return sorted(chosen, key=lambda p: depth[p[1], p[0]])
            found = max(found, len(chosen))
        raise SkipItem(f"{name}: found {found} of {self.points} points {spacing:.0f} px and {self.min_gap} m apart")

    def _greedy(
        self, candidates: np.ndarray, depth: np.ndarray, spacing: float, rng: random.Random
    ) -> list[tuple[int, int]]:
        """Candidates in a random order, each kept when far enough from those kept before, up to
        ``points``."""
        chosen: list[tuple[int, int]] = []
        for i in rng.sample(range(len(candidates)), min(_TRIES, len(candidates))):
            v, u = (int(c) for c in candidates[i])
            z = depth[v, u]
            if far_apart((u, v), chosen, spacing) and all(abs(z - depth[y, x]) >= self.min_gap for x, y in chosen):
                chosen.append((u, v))
                if len(chosen) == self.points:
                    break
        return chosen

    def _candidates(self, depth: np.ndarray, radius: int) -> np.ndarray:
        """``(v, u)`` of qualifying pixels, ``[M, 2]``, at least one marker radius from the
        border."""
        near, far = self.depth_range
        usable = (neighbour_step(depth) < self.min_gap / 2) & (depth >= near) & (depth <= far)
        return inner_pixels(usable, radius)

    def question(self, k: int) -> str:
        circles = (
            f"circles coloured {self.listing(k)}" if self.labels == "colours" else (f"red circles numbered 1 to {k}")
        )
        return (
            f"This image has {k} points marked on it with {circles}. Order the points by their distance from "
            "the camera, judging each by the centre of its circle."
        )
