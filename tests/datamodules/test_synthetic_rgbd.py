"""SyntheticRGBD: ray-cast depth agrees with the placed geometry; rooms are reproducible; depth
tasks run on them."""

import random

import numpy as np
import pytest

pytest.importorskip("open3d", exc_type=ImportError)  # also when its libusb is missing

from datamodules import SyntheticRGBD  # noqa: E402
from tasks import DepthOrder, RegionalDepthOrder, RelativePosition3D  # noqa: E402


def pixel(point, intrinsics) -> tuple[int, int]:
    """The pixel ``(u, v)`` a camera-frame point projects into."""
    x, y, z = point
    return int(intrinsics[0, 0] * x / z + intrinsics[0, 2]), int(intrinsics[1, 1] * y / z + intrinsics[1, 2])


def front(shape) -> np.ndarray:
    """The point of an object nearest the camera along z, straight in front of its centre."""
    half = shape["size"][2] / 2 if shape["kind"] == "box" else shape["radius"]
    return np.array(shape["centre"]) - [0, 0, half]


@pytest.mark.parametrize("index", range(8))
def test_depth_at_an_object_is_its_distance(index):
    source = SyntheticRGBD(width=160, height=120)
    item, scene = source[index], source.scene(index)
    assert item.rgb.shape == (120, 160, 3) and item.depth.shape == (120, 160) and item.depth.dtype == np.float32
    assert np.isfinite(item.depth).all()  # a closed room: every ray hits something
    nearest = min(scene["objects"], key=lambda s: front(s)[2])
    for shape in scene["objects"]:
        u, v = pixel(front(shape), item.intrinsics)
        assert 0 <= u < 160 and 0 <= v < 120  # objects stand in view
        # an object is never seen behind its own front; the nearest one is seen exactly there
        # (spheres are tessellated: their surface lies up to ~1% inside the true sphere)
        assert item.depth[v, u] <= front(shape)[2] + 1e-4 + 0.01 * (shape["kind"] == "sphere")
        if shape is nearest:
            assert item.depth[v, u] == pytest.approx(front(shape)[2], abs=1e-3, rel=0.01)


def test_floor_and_back_wall_depths():
    source = SyntheticRGBD(objects=(0, 0), width=64, height=48)
    item, scene = source[0], source.scene(0)
    fy, cy = item.intrinsics[1, 1], item.intrinsics[1, 2]
    v = 47  # bottom row, on the floor: the ray through its centre meets y = floor at z = floor * fy / (v + 0.5 - cy)
    assert item.depth[v, 32] == pytest.approx(scene["floor"] * fy / (v + 0.5 - cy), rel=1e-4)
    assert item.depth[24, 32] == pytest.approx(scene["back"], rel=1e-4)  # the centre sees the back wall


def test_rooms_are_a_function_of_seed_and_index():
    a, b, other = SyntheticRGBD(seed=0), SyntheticRGBD(seed=0), SyntheticRGBD(seed=1)
    assert np.array_equal(a[3].rgb, b[3].rgb) and np.array_equal(a[3].depth, b[3].depth)
    assert not np.array_equal(a[3].depth, a[4].depth) and not np.array_equal(a[3].depth, other[3].depth)
    with pytest.raises(IndexError):
        SyntheticRGBD(size=2)[2]


def test_depth_tasks_run_on_synthetic_rooms():
    source = SyntheticRGBD(size=20)
    for task in (DepthOrder(), RegionalDepthOrder(), RelativePosition3D()):
        for index in range(20):
            item = source[index]
            example = task.make_example(item, random.Random(index))
            assert task.verify(example, task.render_answer(example)).total == task.max_reward
            if "depths" in example.meta:  # an order: the labels read from near to far follow the depth map
                depths = [item.depth[v, u] for u, v in example.meta["points"]]
                assert [depths[label - 1] for label in example.answer] == sorted(depths)
