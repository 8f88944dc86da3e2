"""`PointCloudFolder`: every point-cloud file (.ply, .pcd, .xyz, .pts) under a directory tree, read
by open3d."""

from __future__ import annotations

from typing import Literal

import numpy as np

from datamodules.sources.base import Source, find_files
from tasks import SkipItem
from tasks.extras import require
from tasks.pointcloud.common import PointCloud, farthest_point_sample, normalize


class PointCloudFolder(Source):
    """Point clouds found recursively under ``root``, sorted by path, each reduced to a fixed point
    budget.

    Item ``i`` is a pure function of ``(seed, i)`` and the file. A file open3d cannot read, a .ply /
    .pcd / .pts (binary or ASCII) shorter than its header promises (open3d would pad it silently
    with whatever memory held), or a file that holds no finite point, raises `tasks.SkipItem` (the
    data module counts it and logs it once).

    Args:
        root: Directory searched recursively.
        extensions: File suffixes to include, matched case-insensitively.
        voxel_size: Voxel downsampling before sampling, in the file's units; None skips it.
        num_points: Points per item. Clouds with fewer points repeat randomly drawn points to fill
            the budget.
        sampling: ``"fps"`` (farthest-point sampling: even coverage, keeps extremes) or
            ``"random"``.
        normalize: Centre on the centroid and scale into the unit sphere.
        seed: Selects the random start point (fps) or subset (random) of each item.
    """

    modality = "point_cloud"

    def __init__(
        self,
        root: str,
        extensions: tuple[str, ...] = (".ply", ".pcd", ".xyz", ".pts"),
        voxel_size: float | None = None,
        num_points: int = 1024,
        sampling: Literal["fps", "random"] = "fps",
        normalize: bool = True,
        seed: int = 0,
    ):
        if voxel_size is not None and not voxel_size > 0:
            raise ValueError(f"voxel_size must be > 0 or None, got {voxel_size}")
        if num_points < 1:
            raise ValueError(f"num_points must be >= 1, got {num_points}")
        if sampling not in ("fps", "random"):
            raise ValueError(f"sampling must be 'fps' or 'random', got {sampling!r}")
        self.root, self.extensions, self.paths = find_files(root, extensions, "PointCloudFolder")
        self.voxel_size = voxel_size
        self.num_points = num_points
        self.sampling = sampling
        self.normalize = normalize
        self.seed = seed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> PointCloud:
        path = self.paths[index]
        o3d = require("open3d", "3d", "PointCloudFolder reads point clouds with open3d")
        try:
            points = self._read(o3d, path)
        except Exception as err:  # open3d raises RuntimeError, numpy ValueError...: all mean skip
            raise SkipItem(f"{path}: {type(err).__name__}: {err}") from err
        points = sample_points(points, self.num_points, self.sampling, np.random.default_rng([self.seed, index]))
        return PointCloud(normalize(points) if self.normalize else points, name=path)

    def describe(self, index: int) -> str:
        return self.paths[index]

    def _read(self, o3d, path: str) -> np.ndarray:
        """``[P, 3]`` or ``[P, 6]`` (with colours) float32 points of a file, finite points only."""
        check_complete(path)
        cloud = o3d.io.read_point_cloud(path)
        if self.voxel_size is not None:
            cloud = cloud.voxel_down_sample(self.voxel_size)
        xyz = np.asarray(cloud.points, dtype=np.float32)
        points = np.concatenate([xyz, np.asarray(cloud.colors, np.float32)], 1) if cloud.has_colors() else xyz
        points = points[np.isfinite(points).all(1)]
        if not len(points):
            raise ValueError("no readable finite points (open3d reads a corrupt file as an empty cloud)")
        return points


def sample_points(points: np.ndarray, k: int, sampling: str, rng: np.random.Generator) -> np.ndarray:
    """Exactly ``k`` rows of ``points``: farthest-point or random sampling, or all rows plus
    randomly repeated ones when there are fewer than ``k``."""
    if len(points) <= k:
        extra = rng.choice(len(points), k - len(points))
        return np.concatenate([points, points[extra]])
    if sampling == "fps":
        return points[farthest_point_sample(points[:, :3], k, start=int(rng.integers(len(points))))]
    return points[np.sort(rng.choice(len(points), k, replace=False))]


PLY_SIZES = {
    "char": 1,
    "uchar": 1,
    "int8": 1,
    "uint8": 1,
    "short": 2,
    "ushort": 2,
    "int16": 2,
    "uint16": 2,
    "int": 4,
    "uint": 4,
    "float": 4,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
}


def check_complete(path: str) -> None:
    """Raise ValueError when a .ply, .pcd or .pts file holds fewer points than its header declares:
    fewer bytes of points (binary) or fewer lines of values (ASCII). open3d reads such a truncated
    file without an error and fills the missing points with whatever memory held."""
    suffix = path.rsplit(".", 1)[-1].lower()
    if suffix not in ("ply", "pcd", "pts"):
        return
    with open(path, "rb") as f:
        data = f.read()
    if suffix == "pts":  # a first line with the point count, then one point per line
        first, _, body = data.partition(b"\n")
        if first.strip().isdigit():
            _check_lines(body, int(first), 3)
        return
    end = data.find(b"end_header\n") + len(b"end_header\n") if suffix == "ply" else data.find(b"\nDATA ")
    if end < len(b"end_header\n"):
        return  # no header to check against: open3d decides
    if suffix == "pcd":
        end = data.index(b"\n", end + 1) + 1  # past the DATA line
    header = data[:end].decode("latin-1").split("\n")
    layout = _ply_layout(header) if suffix == "ply" else _pcd_layout(header)
    if layout is None:
        return
    encoding, count, values, stride = layout
    if encoding == "ascii":
        _check_lines(data[end:], count, values)
    elif stride is not None and len(data) - end < count * stride:
        raise ValueError(f"truncated: {len(data) - end} bytes of points where the header declares {count * stride}")


def _check_lines(body: bytes, count: int, values: int) -> None:
    """ValueError unless the first ``count`` lines of an ASCII body each hold at least ``values``
    values."""
    lines = body.split(b"\n", count)[:count]
    complete = sum(len(line.split()) >= values for line in lines)
    if complete < count:
        raise ValueError(f"truncated: {complete} complete lines of points where the header declares {count}")


def _ply_layout(header: list[str]) -> tuple[str, int, int, int | None] | None:
    """``(encoding, points, values per point, bytes per point)`` of a PLY whose first element is the
    vertices (bytes None when a property has no fixed size); None otherwise."""
    formats = [line.split()[1] for line in header if line.startswith("format ") and len(line.split()) > 1]
    if not formats:
        return None
    encoding = "ascii" if formats[0] == "ascii" else "binary"
    count = 0
    stride = 0
    values = 0
    elements = 0
    for words in (line.split() for line in header):
        if words[:1] == ["element"] and len(words) > 2:
            elements += 1
            count = int(words[2]) if elements == 1 and words[1] == "vertex" else count
        elif words[:1] == ["property"] and elements == 1 and len(words) > 1:
            values += 1
            stride = (
                None
                if stride is None or words[1] == "list" or words[1] not in PLY_SIZES
                else stride + PLY_SIZES[words[1]]
            )
    return (encoding, count, values, stride) if count else None


def _pcd_layout(header: list[str]) -> tuple[str, int, int, int | None] | None:
    """``(encoding, points, values per point, bytes per point)`` of an ASCII or uncompressed binary
    PCD."""
    fields = {words[0]: words[1:] for words in (line.split() for line in header) if words}
    if fields.get("DATA") not in (["ascii"], ["binary"]) or "POINTS" not in fields or "SIZE" not in fields:
        return None
    counts = [int(c) for c in fields.get("COUNT", ["1"] * len(fields["SIZE"]))]
    stride = sum(int(s) * c for s, c in zip(fields["SIZE"], counts, strict=True))
    return fields["DATA"][0], int(fields["POINTS"][0]), sum(counts), stride
