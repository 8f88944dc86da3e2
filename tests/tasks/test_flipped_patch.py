"""FlippedPatch: flipping the named patch back the named way restores the image."""

import random

import numpy as np
import pytest
from PIL import Image

from tasks import FlippedPatch, SkipItem
from tasks.image import grid
from tasks.image.flipped_patch import FLIPS
from tests.helpers import make_item


def test_unflipping_the_named_patch_restores_the_image():
    task = FlippedPatch(labels=False, answer_format="bare")
    directions = set()
    for seed in range(12):
        item = make_item("image", seed)
        example = task.make_example(item, random.Random(seed))
        patch, direction = map(int, task.render_answer(example).split("-"))
        directions.add(direction)
        (shown,) = [p["image"] for p in example.messages[0]["content"] if p["type"] == "image"]
        tiles = grid.cut(shown, 2, 2, 1)
        assert not np.array_equal(np.asarray(tiles[patch]), np.asarray(grid.cut(item, 2, 2, 1)[patch]))
        tiles[patch] = tiles[patch].transpose(FLIPS[direction])
        assert np.array_equal(
            np.asarray(grid.paste(tiles, 2, 2)), np.asarray(grid.paste(grid.cut(item, 2, 2, 1), 2, 2))
        )
    assert directions == {0, 1}


def test_direction_codes_follow_cv2_flip():
    # cv2.flip(patch, 0) turns the patch upside down; 1 mirrors it left to right
    tile = Image.fromarray(np.arange(12, dtype=np.uint8).reshape(3, 4))
    assert np.array_equal(np.asarray(tile.transpose(FLIPS[0])), np.flipud(np.asarray(tile)))
    assert np.array_equal(np.asarray(tile.transpose(FLIPS[1])), np.fliplr(np.asarray(tile)))


def test_parts_credit_patch_and_direction_separately():
    task = FlippedPatch(answer_format="bare")
    example = task.make_example(make_item("image"), random.Random(0))
    patch, direction = example.answer
    other = (patch + 1) % 4
    assert task.verify(example, f"{patch}-{1 - direction}").parts == {
        "accuracy": 0.0,
        "patch": 1.0,
        "direction": 0.0,
        "format": 1.0,
    }
    assert task.verify(example, f"{other}-{direction}").parts["direction"] == 1.0
    for bad in ("4-0", "1-2", "1", "1-0-0"):
        assert task.verify(example, bad).parts["format"] == 0.0


def test_a_flip_that_changes_nothing_is_skipped():
    with pytest.raises(SkipItem, match="looks the same"):
        FlippedPatch().make_example(Image.new("RGB", (64, 64), (9, 9, 9)), random.Random(0))
