"""Point clouds shared by the point-cloud tasks and sources: the item type, geometry helpers,
content parts and a depth-coloured rendering so image-only policies (Qwen-VL) can take the same
tasks.

Coordinates are right-handed with +z up; rotations turn counter-clockwise about an axis (right-hand
rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from tasks.base import SkipItem

AXES = {"x": 0, "y": 1, "z": 2}
NEAR, FAR = np.array([1.0, 0.35, 0.1]), np.array([0.1, 0.3, 1.0])  # depth colours: orange near, blue far


@dataclass
class PointCloud:
    """A point-cloud item: what point-cloud sources yield and point-cloud tasks consume.

    Attributes:
        points: ``[P, 3]`` xyz or ``[P, 6]`` xyz + RGB in 0..1, float32.
        name: Where it came from (a path, or a synthetic id), for logs.
    """

    points: np.ndarray
    name: str = ""


def points_of(item: PointCloud, min_points: int = 1) -> np.ndarray:
    """A float32 copy of the item's points; SkipItem unless they are finite ``[P, 3|6]`` with P >=
    min_points."""
    points = np.asarray(item.points, dtype=np.float32)
    if points.ndim != 2 or points.shape[1] not in (3, 6) or len(points) < min_points:
        raise SkipItem(f"{item.name or 'point cloud'}: need [P >= {min_points}, 3 or 6] points, got {points.shape}")
    if not np.isfinite(points).all():
        raise SkipItem(f"{item.name or 'point cloud'}: non-finite coordinates or colours")
    return points.copy()


def normalize(points: np.ndarray) -> np.ndarray:
    """Points with xyz centred on their centroid and scaled into the unit sphere (colours
    untouched)."""
    out = points.astype(np.float32, copy=True)
    out[:, :3] -= out[:, :3].mean(0)
    radius = float(np.linalg.norm(out[:, :3], axis=1).max())
    if radius > 0:
        out[:, :3] /= radius
    return out


def farthest_point_sample(xyz: np.ndarray, k: int, start: int = 0) -> np.ndarray:
    """Indices ``[k]`` of ``k`` points of ``xyz`` ``[P, 3]`` chosen greedily, each the farthest from
    those already chosen, starting at index ``start`` (needs k <= P)."""
    if not 0 < k <= len(xyz):
        raise ValueError(f"cannot pick {k} of {len(xyz)} points")
    chosen = np.empty(k, dtype=np.int64)
    chosen[0] = start
    nearest = np.full(len(xyz), np.inf)  # [P] distance to the closest chosen point
    for i in range(1, k):
        nearest = np.minimum(nearest, ((xyz - xyz[chosen[i - 1]]) ** 2).sum(1))
        chosen[i] = int(nearest.argmax())
    return chosen


def rotation_matrix(axis: str, degrees: float) -> np.ndarray:
    """``[3, 3]`` counter-clockwise rotation by ``degrees`` about ``axis`` (x, y or z); apply as
    ``xyz @ R.T``."""
    a = AXES[axis]
    b = (a + 1) % 3
    c = (a + 2) % 3
    theta = np.deg2rad(degrees)
    matrix = np.eye(3)
    matrix[b, b] = matrix[c, c] = np.cos(theta)
    matrix[b, c], matrix[c, b] = -np.sin(theta), np.sin(theta)
    return np.round(matrix, 12)


def rotate(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Points with xyz turned by ``matrix`` about the origin (colours untouched)."""
    out = points.copy()
    out[:, :3] = points[:, :3] @ matrix.T
    return out


def render_depth(points: np.ndarray, size: int = 112) -> Image.Image:
    """Orthographic front view (looking along +y: image right is +x, image up is +z) of a cloud in
    the unit sphere, each point a 2x2 dot coloured by depth (orange near, blue far; nearer points
    drawn over farther)."""
    xyz = np.clip(points[:, :3], -1.0, 1.0)
    depth = (xyz[:, 1] + 1) / 2  # [P] 0 near .. 1 far
    order = np.argsort(-depth)  # far first, so near points overwrite them
    cols = ((xyz[order, 0] + 1) / 2 * (size - 2)).astype(int)
    rows = ((1 - xyz[order, 2]) / 2 * (size - 2)).astype(int)
    colours = (NEAR + (FAR - NEAR) * depth[order, None]) * 255  # [P, 3]
    canvas = np.zeros((size, size, 3), np.uint8)
    for dr in (0, 1):
        for dc in (0, 1):
            canvas[rows + dr, cols + dc] = colours.astype(np.uint8)
    return Image.fromarray(canvas)


def cloud_part(points: np.ndarray, render: bool, image_size: int) -> dict:
    """A ``point_cloud`` content part (a float32 copy), or with ``render`` its `render_depth` image
    part."""
    if render:
        return {"type": "image", "image": render_depth(points, image_size)}
    return {"type": "point_cloud", "points": np.array(points, dtype=np.float32)}
