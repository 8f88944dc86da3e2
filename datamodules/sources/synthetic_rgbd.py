"""`SyntheticRGBD`: rooms with boxes and spheres ray-cast by open3d (`RaycastingScene`, CPU, no
display) into colour, depth and intrinsics, so depth tasks need no data on disk."""

from __future__ import annotations

import colorsys
import math

import numpy as np

from datamodules.sources.base import Source
from tasks import RGBD
from tasks.extras import require

_TILE = 0.5  # metres: side of a floor tile


class SyntheticRGBD(Source):
    """Rooms seen from a level camera; item ``i`` is a pure function of ``(seed, i)``.

    Camera frame = world frame (x right, y down, z forward; the camera at the origin). Each room: a
    floor 1.0-1.5 m below the camera, tiled in two tones (0.5 m tiles, a perspective cue); a ceiling
    2.6-3.2 m above the floor; side walls 2-3.5 m to each side; a back wall 6-9 m ahead; all of
    random muted colours. On the floor stand ``objects`` axis-aligned boxes (sides 0.3-1.0 m) and
    spheres (radius 0.2-0.5 m) of saturated random colours, at least 2.5 m ahead and 1 m short of
    the back wall, their centres in the middle 80% of the view (as far as the room allows), apart
    from each other. Surfaces are shaded by the angle between their normal and the viewing ray (a
    light at the camera). Depth is z-depth in metres, exact up to the spheres' tessellation; `scene`
    gives the layout.

    Args:
        size: Number of distinct rooms (the length of the source).
        width: Image width in pixels.
        height: Image height in pixels.
        fov: Horizontal field of view in degrees.
        objects: Fewest and most objects per room.
        seed: Selects a different family of rooms.
    """

    modality = "rgbd"

    def __init__(
        self,
        size: int = 10000,
        width: int = 128,
        height: int = 96,
        fov: float = 70.0,
        objects: tuple[int, int] = (2, 5),
        seed: int = 0,
    ):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if min(width, height) < 16:
            raise ValueError(f"width and height must be >= 16 pixels, got {width} x {height}")
        if not 10 <= fov <= 120:
            raise ValueError(f"fov must be in [10, 120] degrees, got {fov}")
        if not 0 <= objects[0] <= objects[1] <= 8:
            raise ValueError(f"objects must be (fewest, most) with 0 <= fewest <= most <= 8, got {objects}")
        self.size = size
        self.width = width
        self.height = height
        self.fov = fov
        self.objects = tuple(objects)
        self.seed = seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> RGBD:
        rgb, depth = self.render(index)
        return RGBD(rgb, depth, self.intrinsics, name=self.describe(index))

    def describe(self, index: int) -> str:
        return f"SyntheticRGBD(seed={self.seed})[{index}]"

    @property
    def intrinsics(self) -> np.ndarray:
        """The camera matrix ``[3, 3]`` shared by every room (pixel ``(u, v)`` covers ``[u, u + 1) x
        [v, v + 1)``)."""
        focal = self.width / 2 / math.tan(math.radians(self.fov) / 2)
        return np.array([[focal, 0, self.width / 2], [0, focal, self.height / 2], [0, 0, 1]])

    def scene(self, index: int) -> dict:
        """The layout of room ``index``: ``floor`` (y of the floor), ``ceiling``, ``side`` (x of the
        right wall; the left one is at ``-side``), ``back`` (z of the back wall), their ``colours``,
        and ``objects``: dicts with ``kind`` (``box`` or ``sphere``), ``centre`` (x, y, z), ``size``
        (box sides) or ``radius``, ``colour``."""
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticRGBD of size {self.size}")
        rng = np.random.default_rng([self.seed, index])
        floor = rng.uniform(1.0, 1.5)
        room = {
            "floor": floor,
            "ceiling": floor - rng.uniform(2.6, 3.2),
            "side": rng.uniform(2.0, 3.5),
            "back": rng.uniform(6.0, 9.0),
            "colours": rng.uniform(0.35, 0.8, (5, 3)),
        }
        room["objects"] = []
        for _ in range(int(rng.integers(self.objects[0], self.objects[1] + 1))):
            spread = math.tan(math.radians(self.fov) / 2)  # half the view's width at 1 m
            placed = _place(rng, room, spread, spread * self.height / self.width)
            if placed is not None:
                room["objects"].append(placed)
        return room

    def render(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Colour ``[H, W, 3]`` uint8 and depth ``[H, W]`` float32 (NaN where a ray hits nothing) of
        room ``index``."""
        o3d = _open3d()
        room = self.scene(index)
        raycaster = o3d.t.geometry.RaycastingScene()
        colours = []
        for vertices, triangles, colour in _meshes(room, o3d):
            raycaster.add_triangles(
                o3d.core.Tensor(vertices, o3d.core.float32), o3d.core.Tensor(triangles, o3d.core.uint32)
            )
            colours.append(colour)
        intrinsics = o3d.core.Tensor(self.intrinsics, o3d.core.float64)
        rays = raycaster.create_rays_pinhole(
            intrinsics, o3d.core.Tensor(np.eye(4), o3d.core.float64), self.width, self.height
        )  # [H, W, 6]: origin, direction with z = 1
        hits = raycaster.cast_rays(rays)
        depth = hits["t_hit"].numpy().astype(np.float32)  # [H, W]: distance in units of the direction = z-depth
        depth[~np.isfinite(depth)] = np.nan
        ids = hits["geometry_ids"].numpy().astype(np.int64)  # [H, W]
        hit = ids < len(colours)
        base = np.zeros((self.height, self.width, 3))
        base[hit] = np.asarray(colours)[ids[hit]]
        direction = rays.numpy()[..., 3:]  # [H, W, 3]
        normal = hits["primitive_normals"].numpy()  # [H, W, 3]
        cosine = abs((direction * normal).sum(-1)) / np.linalg.norm(direction, axis=-1)  # [H, W]
        points = direction * np.nan_to_num(depth)[..., None]  # hit positions, [H, W, 3]
        tiles = (np.floor(points[..., 0] / _TILE) + np.floor(points[..., 2] / _TILE)) % 2  # [H, W]
        on_floor = hit & (ids == 0)
        base[on_floor] *= (0.75 + 0.25 * tiles[on_floor])[:, None]
        shaded = base * (0.35 + 0.65 * cosine)[..., None]
        return (np.clip(shaded, 0, 1) * 255 + 0.5).astype(np.uint8), depth


def _place(rng: np.random.Generator, room: dict, across: float, down: float) -> dict | None:
    """A box or sphere standing on the floor, its centre in the middle 80% of the view (half of
    which is ``across`` wide and ``down`` high at 1 m), clear of the walls and of the objects
    already placed (None when ten random spots all collide)."""
    kind = ("box", "sphere")[int(rng.integers(2))]
    size = rng.uniform(0.3, 1.0, 3) if kind == "box" else np.full(3, 2 * rng.uniform(0.2, 0.5))
    reach = float(np.hypot(size[0], size[2]) / 2)  # radius of its footprint's bounding circle
    hue = rng.uniform()
    colour = np.array(colorsys.hsv_to_rgb(hue, rng.uniform(0.6, 1.0), rng.uniform(0.7, 1.0)))
    for _ in range(10):
        low = room["floor"] - size[1] / 2  # height of the centre below the camera
        z = rng.uniform(min(max(2.5, low / (0.8 * down)), room["back"] - 1.0), room["back"] - 1.0)
        limit = min(room["side"] - reach, 0.8 * across * z)
        x = rng.uniform(-limit, limit)
        if all(math.hypot(x - o["centre"][0], z - o["centre"][2]) > reach + o["reach"] + 0.1 for o in room["objects"]):
            centre = [float(x), float(low), float(z)]
            shape = {"size": size.tolist()} if kind == "box" else {"radius": float(size[0] / 2)}
            return {"kind": kind, "centre": centre, **shape, "colour": colour.tolist(), "reach": reach}
    return None


def _meshes(room: dict, o3d) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(vertices [V, 3], triangles [F, 3], colour [3])`` of the floor (first), ceiling, walls and
    objects."""
    floor = room["floor"]
    ceiling = room["ceiling"]
    side = room["side"]
    back = room["back"]
    near = -1.0  # the room extends behind the camera, so no ray escapes past the side walls
    quads = [
        [(-side, floor, near), (side, floor, near), (side, floor, back), (-side, floor, back)],
        [(-side, ceiling, near), (side, ceiling, near), (side, ceiling, back), (-side, ceiling, back)],
        [(-side, ceiling, back), (side, ceiling, back), (side, floor, back), (-side, floor, back)],
        [(-side, ceiling, near), (-side, ceiling, back), (-side, floor, back), (-side, floor, near)],
        [(side, ceiling, near), (side, ceiling, back), (side, floor, back), (side, floor, near)],
    ]
    meshes = [
        (np.array(q), np.array([[0, 1, 2], [0, 2, 3]]), colour)
        for q, colour in zip(quads, room["colours"], strict=True)
    ]
    for shape in room["objects"]:
        if shape["kind"] == "box":
            mesh = o3d.geometry.TriangleMesh.create_box(*shape["size"])
            mesh.translate(np.array(shape["centre"]) - np.array(shape["size"]) / 2)
        else:
            mesh = o3d.geometry.TriangleMesh.create_sphere(shape["radius"], resolution=24)
            mesh.translate(shape["centre"])
        meshes.append((np.asarray(mesh.vertices), np.asarray(mesh.triangles), np.array(shape["colour"])))
    return meshes


def _open3d():
    return require("open3d", "3d", "SyntheticRGBD ray-casts with open3d")
