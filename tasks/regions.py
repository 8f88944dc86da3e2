"""Answered regions as ballots, and GUI-RC's vote over them: every valid prediction of an example
adds one vote to each cell of its region (a click point becomes a square) on a grid the size of the
answer space; the consensus is where the votes peak (GUI-RC and GUI-RCPO, ZJU-REAL/GUI-RCPO).

Used by `tasks.RegionConsistency` (a self-reward: each prediction earns its region's mean vote over
the peak) and by majority voting at evaluation (``maj@k`` of a grounding task: the prediction that
lies most within the consensus wins, `region_winner`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Half side, in answer coordinates, of the square a predicted point votes for (GUI-RCPO's
#: ``point_expand_size``).
POINT_SIZE = 10


@dataclass(frozen=True)
class Region:
    """A grounding answer as a ballot: ``box`` ``(x1, y1, x2, y2)`` (a point has ``x1 == x2`` and
    ``y1 == y2``) in an answer space of ``width`` x ``height``. Two ballots are equal when they
    name the same box; `region_winner` votes by overlap instead."""

    box: tuple[float, float, float, float]
    width: int
    height: int


def cells(region: Region, point_size: int = POINT_SIZE, max_area: float = 1.0) -> tuple[int, int, int, int] | None:
    """The grid cells ``(x1, y1, x2, y2)`` (end exclusive) ``region`` covers, or None when it
    covers none or more than ``max_area`` of the grid."""
    x1, y1, x2, y2 = region.box
    if x1 == x2 and y1 == y2:  # a point: the square around it
        x1, y1, x2, y2 = x1 - point_size, y1 - point_size, x2 + point_size, y2 + point_size
    out = (
        max(0, math.floor(x1)),
        max(0, math.floor(y1)),
        min(region.width, math.ceil(x2)),
        min(region.height, math.ceil(y2)),
    )
    area = (out[2] - out[0]) * (out[3] - out[1])
    if out[2] <= out[0] or out[3] <= out[1] or area > max_area * region.width * region.height:
        return None
    return out


def vote_grid(boxes: list[tuple[int, int, int, int] | None], width: int, height: int) -> np.ndarray:
    """``[height, width]`` votes: one per box (`cells`) on each cell it covers."""
    grid = np.zeros((height, width), np.int32)
    for box in filter(None, boxes):
        grid[box[1] : box[3], box[0] : box[2]] += 1
    return grid


def density(grid: np.ndarray, box: tuple[int, int, int, int], peak: int) -> float:
    """Mean vote over the cells of ``box`` divided by the grid's highest vote, in (0, 1]."""
    x1, y1, x2, y2 = box
    return float(grid[y1:y2, x1:x2].sum()) / (peak * (x2 - x1) * (y2 - y1))


def region_winner(ballots: list[Region | None], point_size: int = POINT_SIZE) -> int | None:
    """The index of the ballot that lies most within the consensus of all of them (the highest
    `density`; the first among equals), None when none is a valid region."""
    boxes = [None if ballot is None else cells(ballot, point_size) for ballot in ballots]
    valid = [b for b in boxes if b is not None]
    if not valid:
        return None
    first = next(ballot for ballot in ballots if ballot is not None)
    grid = vote_grid(boxes, first.width, first.height)
    peak = int(grid.max())
    scores = [-1.0 if box is None else density(grid, box, peak) for box in boxes]
    return scores.index(max(scores))
