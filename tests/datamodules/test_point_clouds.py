"""Point-cloud sources: real .ply/.pcd/.xyz/.pts files read back through open3d, fixed budgets,
skips, and the synthetic objects."""

import logging

import numpy as np
import pytest

from datamodules import PointCloudFolder, PretextDataModule, SyntheticPointClouds
from datamodules.sources.point_cloud_folder import sample_points
from tasks import PointCloudRotation, SkipItem

o3d = pytest.importorskip("open3d", exc_type=ImportError)  # with libusb-1.0 preloaded (conftest)


def cloud(seed, n=300):
    """A box of points ``[n, 6]`` with x in [0, 4], coloured by height."""
    rng = np.random.default_rng(seed)
    xyz = rng.uniform([0, 0, 0], [4, 2, 1], (n, 3))
    return np.concatenate([xyz, np.repeat(xyz[:, 2:], 3, 1)], 1)


def write(path, points):
    pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points[:, :3].astype(np.float64)))
    if points.shape[1] == 6:
        pcd.colors = o3d.utility.Vector3dVector(points[:, 3:].astype(np.float64))
    assert o3d.io.write_point_cloud(str(path), pcd)
    return path


@pytest.mark.parametrize("suffix", [".ply", ".pcd", ".xyz", ".pts"])
def test_files_are_read_back_exactly(tmp_path, suffix):
    points = cloud(0, 50)
    write(tmp_path / f"a{suffix}", points)
    source = PointCloudFolder(str(tmp_path), num_points=50, normalize=False)
    item = source[0]
    assert item.name.endswith(f"a{suffix}") and item.points.dtype == np.float32
    channels = 3 if suffix == ".xyz" else 6  # .xyz holds coordinates only
    assert item.points.shape == (50, channels)
    # every written point (and colour) comes back, in any order, to the precision of the text
    # formats
    got, expected = item.points[np.lexsort(item.points[:, :3].T)], points[np.lexsort(points[:, :3].T)]
    assert np.allclose(got[:, :3], expected[:, :3], atol=1e-4)
    assert np.allclose(got[:, 3:], expected[:, 3:channels], atol=1 / 255)  # colours may be stored as bytes


def test_budget_normalisation_and_determinism(tmp_path):
    write(tmp_path / "big.ply", cloud(1, 2000))
    write(tmp_path / "small.ply", cloud(2, 40))
    for sampling in ("fps", "random"):
        source = PointCloudFolder(str(tmp_path), num_points=128, sampling=sampling, seed=3)
        for i in range(2):
            points = source[i].points
            assert points.shape == (128, 6)
            assert np.allclose(points[:, :3].mean(0), 0, atol=1e-5)
            assert np.linalg.norm(points[:, :3], axis=1).max() == pytest.approx(1.0, abs=1e-5)
            assert np.array_equal(points, source[i].points)  # same item, same points
    other = PointCloudFolder(str(tmp_path), num_points=128, seed=4)
    assert not np.array_equal(other[0].points, PointCloudFolder(str(tmp_path), num_points=128, seed=3)[0].points)


def test_voxel_downsampling_reduces_points(tmp_path):
    write(tmp_path / "dense.ply", cloud(5, 3000))
    coarse = PointCloudFolder(str(tmp_path), voxel_size=1.0, num_points=10_000, normalize=False)
    distinct = np.unique(coarse[0].points[:, :3].round(5), axis=0)
    assert 8 <= len(distinct) <= 5 * 3 * 2  # one point per occupied unit voxel of a 4 x 2 x 1 box


def test_farthest_point_sampling_keeps_the_extremes():
    points = cloud(6, 1000)
    points[7, :3], points[9, :3] = [-20, 0, 0], [30, 0, 0]
    picked = sample_points(points, 16, "fps", np.random.default_rng(0))
    assert len(picked) == 16 and len(np.unique(picked, axis=0)) == 16
    assert picked[:, 0].min() == -20 and picked[:, 0].max() == 30


def test_corrupt_and_empty_files_are_skipped_counted_and_logged_once(tmp_path, caplog):
    for i in range(4):
        write(tmp_path / f"ok{i}.ply", cloud(i, 100))
    (tmp_path / "broken.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 99\n" + b"\x00" * 5)
    (tmp_path / "empty.xyz").write_text("")
    source = PointCloudFolder(str(tmp_path), num_points=64)
    assert len(source) == 6
    data = PretextDataModule(source, PointCloudRotation(answer_format="bare"), batch_size=2, val_size=0, epoch_size=12)
    data.setup("fit")
    with caplog.at_level(logging.WARNING):
        batches = [batch for _ in range(2) for batch in data.train_dataloader()]
    assert sum(len(b) for b in batches) == 24
    assert data.skipped >= 4  # both bad files, met at least once in each of the two epochs
    for name in ("broken.ply", "empty.xyz"):
        assert sum(name in record.getMessage() for record in caplog.records) == 1


def test_synthetic_objects_are_deterministic_upright_and_coloured():
    source = SyntheticPointClouds(size=20, num_points=300, seed=1)
    item = source[5]
    assert item.points.shape == (300, 6) and item.points.dtype == np.float32
    assert np.array_equal(item.points, SyntheticPointClouds(size=20, num_points=300, seed=1)[5].points)
    assert not np.array_equal(item.points, SyntheticPointClouds(size=20, num_points=300, seed=2)[5].points)
    assert SyntheticPointClouds(num_points=100, colors=False)[0].points.shape == (100, 3)
    # upright: the widest part is at the bottom, so the lower half spreads further from the z axis
    for i in range(20):
        xyz = source[i].points[:, :3]
        low = xyz[:, 2] < np.median(xyz[:, 2])
        assert np.abs(xyz[low, :2]).max() >= np.abs(xyz[~low, :2]).max()
    with pytest.raises(IndexError):
        source[20]


@pytest.mark.parametrize("suffix", ["ply", "pcd"])
def test_a_truncated_binary_file_is_skipped_not_padded(tmp_path, suffix):
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.random.default_rng(0).random((300, 3))))
    whole = tmp_path / f"whole.{suffix}"
    o3d.io.write_point_cloud(str(whole), cloud)  # binary by default
    data = whole.read_bytes()
    (tmp_path / f"cut.{suffix}").write_bytes(data[: len(data) - 200])
    folder = PointCloudFolder(str(tmp_path), num_points=64)
    assert len(folder[folder.paths.index(str(whole))].points) == 64
    with pytest.raises(SkipItem, match="truncated"):
        folder[folder.paths.index(str(tmp_path / f"cut.{suffix}"))]
