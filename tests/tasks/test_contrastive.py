"""Contrastive: positives are two views of one image, negatives one view of each of two images."""

import random

import numpy as np
import pytest
from PIL import Image

from tasks import Contrastive, SkipItem
from tasks.image.contrastive import halves


def _flat(color, size=64):
    return Image.new("RGB", (size, size), color)


def test_answer_matches_where_the_views_came_from():
    # no photometric change (p=0): a view of a flat red image is red, of a flat blue image blue
    task = Contrastive(size=16, p=0.0)
    answers = set()
    for seed in range(20):
        example = task.make_example([_flat((200, 0, 0)), _flat((0, 0, 200))], random.Random(seed))
        views = [np.asarray(p["image"]) for p in example.messages[0]["content"] if p["type"] == "image"]
        colours = {"red" if v[..., 0].mean() > v[..., 2].mean() else "blue" for v in views}
        assert example.answer == ("positive" if len(colours) == 1 else "negative")
        answers.add(example.answer)
    assert answers == {"positive", "negative"}


def test_a_single_image_stands_for_two_by_its_halves():
    image = Image.new("RGB", (80, 40))
    image.paste((255, 0, 0), (0, 0, 40, 40))
    left, right = halves(image)
    assert left.size == right.size == (40, 40)
    assert np.asarray(left)[..., 0].min() == 255 and np.asarray(right)[..., 0].max() == 0
    assert [h.size for h in halves(image.rotate(90, expand=True))] == [(40, 40), (40, 40)]


def test_views_have_the_configured_size_and_augmentations_vary():
    task = Contrastive(size=32)
    pair = [_flat((10, 120, 30)), _flat((90, 20, 200))]
    views = [
        [p["image"] for p in task.make_example(pair, random.Random(s)).messages[0]["content"] if p["type"] == "image"]
        for s in range(4)
    ]
    assert all(v.size == (32, 32) for vs in views for v in vs)
    assert len({v.tobytes() for vs in views for v in vs}) > 4


def test_too_small_items_are_skipped_and_bad_arguments_raise():
    with pytest.raises(SkipItem):
        Contrastive().make_example(_flat((0, 0, 0), 20), random.Random(0))
    with pytest.raises(ValueError):
        Contrastive(scale=[0.5, 0.1])
    assert Contrastive.partners == 1
