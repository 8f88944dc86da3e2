"""Rotation: exact quarter turns, fill-free crops for other angles, strict angle parsing."""

import random

import numpy as np
import pytest
from PIL import Image

from tasks import Rotation, SkipItem, answers
from tasks.image.rotation import inscribed_size
from tests.helpers import make_item


def _images(example):
    return [part["image"] for part in example.messages[0]["content"] if part["type"] == "image"]


def _square(image):
    side = min(image.size)
    left, top = (image.width - side) // 2, (image.height - side) // 2
    return image.crop((left, top, left + side, top + side))


def _example_with_angle(task, item, angle):
    """Search seeds until the task draws ``angle`` (the draw is the task's business, not the
    test's)."""
    for seed in range(200):
        example = task.make_example(item, random.Random(seed))
        if example.answer == angle:
            return example
    raise AssertionError(f"angle {angle} never drawn")


@pytest.mark.parametrize("angle", [0, 90, 180, 270])
def test_quarter_turns_are_pixel_exact(angle):
    item = make_item("image", seed=1)
    example = _example_with_angle(Rotation(), item, angle)
    (rotated,) = _images(example)
    expected = _square(item).rotate(angle, expand=True)
    assert np.array_equal(np.asarray(rotated), np.asarray(expected))


@pytest.mark.parametrize("seed", range(8))
def test_turning_back_by_the_rendered_answer_restores_the_source(seed):
    item = make_item("image", seed=seed)
    task = Rotation(answer_format="boxed")
    example = task.make_example(item, random.Random(seed))
    answer, _ = answers.extract(task.render_answer(example), "boxed", think=False)
    (rotated,) = _images(example)
    upright = rotated.rotate(-int(answer), expand=True)
    assert np.array_equal(np.asarray(upright), np.asarray(_square(item)))


def test_square_false_keeps_the_aspect_ratio():
    item = make_item("image")
    example = _example_with_angle(Rotation(square=False), item, 90)
    (rotated,) = _images(example)
    assert rotated.size == (item.height, item.width)


def test_show_original_gives_original_then_rotated():
    item = make_item("image", seed=2)
    example = _example_with_angle(Rotation(show_original=True), item, 270)
    original, rotated = _images(example)
    assert np.array_equal(np.asarray(original), np.asarray(_square(item)))
    assert np.array_equal(np.asarray(rotated), np.asarray(_square(item).rotate(270, expand=True)))
    assert example.messages[0]["content"][-1]["type"] == "text"


def test_letters_label_the_options_in_order():
    task = Rotation(angles=[0, 90, 180, 270], labels="letters")
    example = _example_with_angle(task, make_item("image"), 180)
    text = example.prompt_text
    assert "A) 0 degrees" in text and "B) 90 degrees" in text and "D) 270 degrees" in text
    assert task.answer_text(example) == "C"
    assert task.score(example, "C") == {"accuracy": 1.0}
    assert task.score(example, "(c)") == {"accuracy": 1.0}
    for wrong in ["A", "B", "D"]:  # valid options: format but no accuracy
        assert task.score(example, wrong) == {"accuracy": 0.0}, wrong
    for invalid in ["E", "180", "C or D", "C) 180 degrees"]:  # not an option at all
        assert task.score(example, invalid) is None, invalid
        assert task.verify(example, invalid).parts == {"accuracy": 0.0, "format": 0.0}


@pytest.mark.parametrize(
    "answer, correct",
    [
        ("270", True),
        ("270°", True),
        ("270 °", True),
        ("270 degrees", True),
        ("270 Degree", True),
        (" 270 ", True),
        ("-90", True),  # the same rotation modulo 360
        ("630", True),
        ("90", False),
        ("0", False),
        ("270 or 180", None),
        ("about 270", None),
        ("ninety", None),
        ("270.0", None),
        ("270 degrees counter-clockwise", None),
        ("270 270", None),
        ("degrees", None),
        ("°", None),
        ("270°°", None),
    ],
)
def test_degrees_parsing(answer, correct):
    task = Rotation()
    example = _example_with_angle(task, make_item("image"), 270)
    expected = None if correct is None else {"accuracy": float(correct)}  # None: not a valid answer
    assert task.score(example, answer) == expected


def test_zero_accepts_360():
    task = Rotation()
    example = _example_with_angle(task, make_item("image"), 0)
    assert task.score(example, "360") == {"accuracy": 1.0}
    assert task.score(example, "0 degrees") == {"accuracy": 1.0}


@pytest.mark.parametrize("angle", [30, 45, 100, 135, 200, 333])
def test_other_angles_crop_away_all_fill(angle):
    colour = (200, 60, 20)
    item = Image.new("RGB", (97, 61), colour)
    for square in (True, False):
        example = _example_with_angle(Rotation(angles=[0, angle], square=square, min_size=8), item, angle)
        (rotated,) = _images(example)
        assert (np.asarray(rotated) == colour).all()
        # and the crop is the largest such rectangle, not a needlessly small one
        width, height = inscribed_size(61 if square else 97, 61, np.radians(angle))
        assert rotated.size == (int(width), int(height))


def test_inscribed_size_hand_computed():
    # a square turned 45 degrees holds a square of side s / sqrt(2)
    assert inscribed_size(10, 10, np.radians(45)) == pytest.approx((10 / 2**0.5, 10 / 2**0.5))
    # a long thin strip at 45 degrees: only its short side binds, w = h = short / (2 sin 45)
    assert inscribed_size(100, 10, np.radians(45)) == pytest.approx((10 / 2**0.5, 10 / 2**0.5))
    # a quarter turn swaps the sides
    assert inscribed_size(100, 10, np.radians(90)) == pytest.approx((10, 100))


def test_any_image_mode_is_converted():
    item = make_item("image").convert("L")
    (rotated,) = _images(Rotation().make_example(item, random.Random(0)))
    assert rotated.mode == "RGB"


def test_too_small_raises_skip_item():
    with pytest.raises(SkipItem):
        Rotation().make_example(Image.new("RGB", (27, 200)), random.Random(0))
    Rotation().make_example(Image.new("RGB", (28, 200)), random.Random(0))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"angles": [0]},
        {"angles": [0, 360]},
        {"angles": [90, -270]},
        {"labels": "numbers"},
        {"min_size": 0},
        {"answer_format": "json"},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        Rotation(**kwargs)


def test_angles_are_normalised():
    task = Rotation(angles=[-90, 450])
    assert task.angles == [270, 90]
