"""PatchPosition: the crop is found in the first image, inside the quadrant the answer names."""

import random

import numpy as np
import pytest

from tasks import PatchPosition, SkipItem
from tasks.image.patch_position import QUADRANTS
from tests.helpers import make_item


def _find(image, crop):
    """Top-left corners where ``crop`` occurs in ``image`` exactly."""
    big, small = np.asarray(image).astype(np.int16), np.asarray(crop).astype(np.int16)
    h, w = small.shape[:2]
    return [
        (x, y)
        for y in range(big.shape[0] - h + 1)
        for x in range(big.shape[1] - w + 1)
        if np.array_equal(big[y : y + h, x : x + w], small)
    ]


def test_the_crop_lies_in_the_answered_quadrant():
    task = PatchPosition(min_size=8)
    seen = set()
    for seed in range(8):
        example = task.make_example(make_item("image", seed), random.Random(seed))
        image, crop = [p["image"] for p in example.messages[0]["content"] if p["type"] == "image"]
        seen.add(example.answer)
        ((x, y),) = _find(image, crop)
        cx, cy = x + crop.width / 2, y + crop.height / 2
        named = QUADRANTS[2 * (cy >= image.height / 2) + (cx >= image.width / 2)]
        assert named == task.render_answer(example).removeprefix("<answer>").removesuffix("</answer>")
        w, h = image.width // 2, image.height // 2
        assert 0.2 * w - 1 <= crop.width <= 0.8 * w and 0.2 * h - 1 <= crop.height <= 0.8 * h
    assert len(seen) >= 3


def test_augmented_crops_keep_their_size_and_change_pixels():
    plain = PatchPosition(min_size=8).make_example(make_item("image"), random.Random(3))
    aug = PatchPosition(min_size=8, augment=True).make_example(make_item("image"), random.Random(3))
    crops = [[p["image"] for p in e.messages[0]["content"] if p["type"] == "image"][1] for e in (plain, aug)]
    assert crops[0].size == crops[1].size and plain.answer == aug.answer
    assert not np.array_equal(np.asarray(crops[0]), np.asarray(crops[1]))


def test_answers_are_parsed_strictly():
    task = PatchPosition(answer_format="bare", min_size=8)
    example = task.make_example(make_item("image"), random.Random(0))
    assert task.verify(example, example.answer.upper()).parts["accuracy"] == 1.0
    assert task.verify(example, "top left corner").parts["format"] == 0.0


def test_too_small_images_are_skipped():
    with pytest.raises(SkipItem):
        PatchPosition(min_size=40).make_example(make_item("image"), random.Random(0))
