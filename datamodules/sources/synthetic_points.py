"""`SyntheticPointClouds`: upright objects made of primitives, sampled as coloured point clouds on
the fly.

Each object stacks two or three primitives (boxes, spheres, cylinders, cones, tori) along +z, each
narrower than the one below, so "up" is plain from the geometry (point-cloud rotation is learnable)
and the slabs of a cut differ (point-cloud jigsaw).
"""

from __future__ import annotations

import numpy as np

from datamodules.sources.base import Source
from tasks.pointcloud.common import PointCloud, normalize


def _box(rng, n, w, h):
    """Surface of a box ``w x w x h`` with its base at z = 0."""
    face = rng.integers(0, 6, n)
    uv = rng.uniform(-0.5, 0.5, (n, 2))
    pts = np.empty((n, 3))
    axis = face // 2
    side = face % 2 - 0.5
    for a in range(3):
        others = [b for b in range(3) if b != a]
        sel = axis == a
        pts[sel, a] = side[sel]
        pts[np.ix_(sel, others)] = uv[sel]
    return pts * [w, w, h] + [0, 0, h / 2]


def _sphere(rng, n, w, h):
    v = rng.normal(size=(n, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True) * [w / 2, w / 2, h / 2] + [0, 0, h / 2]


def _cylinder(rng, n, w, h):
    theta = rng.uniform(0, 2 * np.pi, n)
    z = rng.uniform(0, h, n)
    return np.stack([np.cos(theta) * w / 2, np.sin(theta) * w / 2, z], 1)


def _cone(rng, n, w, h):
    theta, t = rng.uniform(0, 2 * np.pi, n), 1 - np.sqrt(rng.uniform(0, 1, n))  # uniform on the side
    r = (1 - t) * w / 2
    return np.stack([np.cos(theta) * r, np.sin(theta) * r, t * h], 1)


def _torus(rng, n, w, h):
    theta, phi = rng.uniform(0, 2 * np.pi, (2, n))
    tube = min(w / 6, h / 2)
    ring = w / 2 - tube + tube * np.cos(phi)
    return np.stack([np.cos(theta) * ring, np.sin(theta) * ring, tube + tube * np.sin(phi)], 1)


PRIMITIVES = {"box": _box, "sphere": _sphere, "cylinder": _cylinder, "cone": _cone, "torus": _torus}


class SyntheticPointClouds(Source):
    """Upright objects of stacked primitives; item ``i`` is a pure function of ``(seed, i)``.

    Each object: 2-3 parts of random kinds stacked on +z, widths shrinking upwards (each part
    0.45-0.8 of the one below), each part with its own random colour, points shared equally between
    parts, slight noise (sigma 0.005), normalised to the unit sphere.

    Args:
        size: Number of distinct objects (the length of the source).
        num_points: Points per object.
        colors: Add RGB colours (``[P, 6]`` points) instead of xyz only.
        seed: Selects a different family of objects.
    """

    modality = "point_cloud"

    def __init__(self, size: int = 10000, num_points: int = 512, colors: bool = True, seed: int = 0):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if num_points < 8:
            raise ValueError(f"num_points must be >= 8, got {num_points}")
        self.size = size
        self.num_points = num_points
        self.colors = colors
        self.seed = seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> PointCloud:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticPointClouds of size {self.size}")
        rng = np.random.default_rng([self.seed, index])
        points = make_object(rng, self.num_points)
        return PointCloud(normalize(points if self.colors else points[:, :3]), name=self.describe(index))

    def describe(self, index: int) -> str:
        return f"SyntheticPointClouds(seed={self.seed})[{index}]"


def make_object(rng: np.random.Generator, num_points: int) -> np.ndarray:
    """One upright object as ``[num_points, 6]`` float32 xyz + RGB; all randomness from ``rng``."""
    num_parts = int(rng.integers(2, 4))
    counts = np.diff(np.linspace(0, num_points, num_parts + 1).astype(int))
    kinds = rng.choice(list(PRIMITIVES), num_parts)
    width = rng.uniform(0.8, 1.2)
    base = 0.0
    parts = []
    for kind, n in zip(kinds, counts, strict=True):
        height = width * rng.uniform(0.5, 1.2)
        xyz = PRIMITIVES[kind](rng, n, width, height) + [0, 0, base]
        parts.append(np.concatenate([xyz, np.tile(rng.uniform(0.1, 1.0, 3), (n, 1))], 1))
        base, width = base + height, width * rng.uniform(0.45, 0.8)
    points = np.concatenate(parts)
    points[:, :3] += rng.normal(0, 0.005, (num_points, 3))
    return points.astype(np.float32)
