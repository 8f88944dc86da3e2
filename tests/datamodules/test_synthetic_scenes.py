"""SyntheticScenes: deterministic, cheap, and visibly upright."""

import time

import numpy as np
import pytest

from datamodules import SyntheticScenes


def pixels(image):
    return np.asarray(image, dtype=np.float64) / 255


def test_items_are_a_pure_function_of_seed_and_index():
    a, b = SyntheticScenes(seed=1), SyntheticScenes(seed=1)
    assert all(np.array_equal(pixels(a[i]), pixels(b[i])) for i in (0, 5, 9999))
    # same item read twice, out of order, is unchanged
    assert np.array_equal(pixels(a[5]), pixels(b[5]))
    assert not np.array_equal(pixels(a[0]), pixels(a[1]))
    assert not np.array_equal(pixels(a[0]), pixels(SyntheticScenes(seed=2)[0]))


def test_size_mode_and_length():
    source = SyntheticScenes(size=7, image_size=40)
    assert len(source) == 7
    image = source[6]
    assert image.mode == "RGB" and image.size == (40, 40)
    with pytest.raises(IndexError):
        source[7]
    with pytest.raises(ValueError):
        SyntheticScenes(image_size=2)


def test_up_is_visible_in_every_scene():
    source = SyntheticScenes(size=200)
    for i in range(0, 200, 4):
        image = pixels(source[i])
        quarter = image.shape[0] // 4
        top, bottom = image[:quarter].mean((0, 1)), image[-quarter:].mean((0, 1))
        assert top[2] - bottom[2] > 0.3  # blue sky above green ground
        assert top[2] > top[1] and bottom[1] > bottom[2]


def test_scenes_vary():
    source = SyntheticScenes(size=50)
    images = np.stack([pixels(source[i]) for i in range(50)])
    horizon_rows = [(img[..., 1] > img[..., 2]).mean() for img in images]  # fraction of ground pixels
    assert np.std(horizon_rows) > 0.03
    assert images.std(0).mean() > 0.05


def test_left_and_right_halves_differ_on_average():
    images = np.stack([pixels(SyntheticScenes()[i]) for i in range(100)])
    half = images.shape[2] // 2
    left, right = images[:, :, :half], images[:, :, half:]
    ground = lambda part: (part[..., 1] > part[..., 2]).mean()
    assert ground(left) - ground(right) > 0.01  # the horizon slopes: more ground on the left
    sun = lambda part: ((part[..., 0] > 0.8) & (part[..., 2] < 0.5)).mean()
    assert sun(left) > 5 * sun(right)


def test_fast_enough_for_on_the_fly_data():
    source = SyntheticScenes(size=300)
    start = time.perf_counter()
    for i in range(300):
        source[i]
    assert (time.perf_counter() - start) / 300 < 5e-3  # about 0.4 ms on a laptop core; loose for CI
