"""Point-cloud tasks: undoing the rendered answer restores the cloud; geometry helpers;
rendering."""

import random

import numpy as np
import pytest

from tasks import PointCloud, PointCloudJigsaw, PointCloudRotation, SkipItem, answers
from tasks.pointcloud.common import farthest_point_sample, normalize, render_depth, rotation_matrix
from tasks.pointcloud.rotation import matrix_of
from tests.helpers import make_item


def _clouds(example):
    return [p["points"] for m in example.messages for p in m["content"] if p["type"] == "point_cloud"]


def test_rotation_matrices_turn_counter_clockwise():
    assert np.allclose(np.array([1.0, 0, 0]) @ rotation_matrix("z", 90).T, [0, 1, 0])
    assert np.allclose(np.array([0, 0, 1.0]) @ rotation_matrix("x", 90).T, [0, -1, 0])
    assert np.allclose(np.array([0, 0, 1.0]) @ rotation_matrix("y", 90).T, [1, 0, 0])


@pytest.mark.parametrize("seed", range(6))
def test_undoing_the_answered_rotation_restores_the_cloud(seed):
    item = make_item("point_cloud", seed)
    task = PointCloudRotation(answer_format="tags")
    example = task.make_example(item, random.Random(seed))
    answer, _ = answers.extract(task.render_answer(example), "tags", think=False)
    spec = answers.parse_letter(answer, task.rotations)
    (shown,) = _clouds(example)
    upright = shown[:, :3] @ matrix_of(spec)  # R^-1 = R^T, applied to rows
    assert np.allclose(upright, normalize(item.points)[:, :3], atol=1e-5)
    others = [r for r in task.rotations if r != spec]  # no other option undoes it
    assert not any(np.allclose(shown[:, :3] @ matrix_of(r), upright, atol=1e-3) for r in others)
    assert task.verify(example, task.render_answer(example)).total == 1.0


def test_rotation_choices_are_configurable_and_checked():
    task = PointCloudRotation(rotations=["none", "x90", "x180", "y90"], answer_format="bare")
    example = task.make_example(make_item("point_cloud"), random.Random(0))
    assert "D) 90 degrees about the y axis" in example.prompt_text and "E)" not in example.prompt_text
    assert task.verify(example, "E").parts["format"] == 0.0
    with pytest.raises(ValueError, match="different"):
        PointCloudRotation(rotations=["x90", "x450"])
    with pytest.raises(ValueError, match="axis"):
        PointCloudRotation(rotations=["w90", "none"])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("axis", ["x", "z"])
def test_restoring_the_answered_slab_order_rebuilds_the_cloud(seed, axis):
    item = make_item("point_cloud", seed)
    task = PointCloudJigsaw(num_slabs=4, axis=axis, answer_format="bare")
    example = task.make_example(item, random.Random(seed))
    slabs = _clouds(example)
    assert all(np.allclose(s[:, :3].mean(0), 0, atol=1e-5) for s in slabs)  # position does not leak
    order = answers.parse_permutation(task.render_answer(example), 4)
    centres = answers.restore(example.meta["centres"], order)
    rebuilt = np.concatenate([s[:, :3] + c for s, c in zip(answers.restore(slabs, order), centres, strict=True)])
    a = "xyz".index(axis)
    original = normalize(item.points)[:, :3]
    assert np.allclose(rebuilt, original[np.argsort(original[:, a], kind="stable")], atol=1e-5)
    assert np.all(np.diff(rebuilt[:, a]) >= -1e-6)  # low to high along the axis
    assert task.verify(example, task.render_answer(example)).total == 1.0


def test_jigsaw_partial_credit_is_graded():
    task = PointCloudJigsaw(num_slabs=3, answer_format="bare")
    example = task.make_example(make_item("point_cloud"), random.Random(1))
    truth = example.answer
    swapped = [truth[1], truth[0], truth[2]]
    reward = task.verify(example, ", ".join(map(str, swapped)))
    assert reward.parts["fraction"] == pytest.approx(1 / 3) and reward.total == pytest.approx(1 / 3)
    assert task.verify(example, "1, 1, 2").total == 0.0


@pytest.mark.parametrize("cls", [PointCloudRotation, PointCloudJigsaw])
def test_render_shows_images_and_keeps_the_modality(cls):
    task = cls(render=True, image_size=64)
    example = task.make_example(make_item("point_cloud"), random.Random(0))
    kinds = {p["type"] for m in example.messages for p in m["content"]}
    assert kinds == {"image", "text"} and cls.modality == "point_cloud"
    images = [p["image"] for m in example.messages for p in m["content"] if p["type"] == "image"]
    assert all(im.size == (64, 64) and np.asarray(im).any() for im in images)


def test_render_colours_depth_and_places_up_at_the_top():
    near_top = np.array([[0.0, -0.9, 0.9]], np.float32)  # close to the viewer, high up
    far_bottom = np.array([[0.0, 0.9, -0.9]], np.float32)
    image = np.asarray(render_depth(np.concatenate([near_top, far_bottom]), 32)).astype(int)
    lit = np.argwhere(image.any(-1))
    top, bottom = image[lit[:, 0].min(), lit[lit[:, 0].argmin(), 1]], image[lit[:, 0].max(), lit[lit[:, 0].argmax(), 1]]
    assert top[0] > top[2] and bottom[2] > bottom[0]  # orange (near) on top, blue (far) below


def test_farthest_point_sampling_covers_the_extremes():
    rng = np.random.default_rng(0)
    xyz = rng.uniform(-0.5, 0.5, (500, 3))
    xyz[[10, 20]] = [[5, 0, 0], [-5, 0, 0]]  # two far outliers
    chosen = farthest_point_sample(xyz, 8, start=0)
    assert len(set(chosen.tolist())) == 8 and {10, 20} <= set(chosen.tolist())


def test_bad_clouds_are_skipped():
    task = PointCloudRotation()
    with pytest.raises(SkipItem):
        task.make_example(PointCloud(np.zeros((10, 4), np.float32)), random.Random(0))
    with pytest.raises(SkipItem):
        task.make_example(PointCloud(np.full((10, 3), np.nan, np.float32)), random.Random(0))
