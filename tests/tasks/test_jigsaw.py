"""Jigsaw: the original image is rebuilt from the shown tiles and the rendered answer, pixel for
pixel."""

import random

import numpy as np
import pytest
from PIL import Image

from tasks import Jigsaw, SkipItem, answers
from tasks.image import grid
from tests.helpers import make_item

GRIDS = [(1, 2), (2, 1), (2, 2), (3, 3), (2, 3)]


def _crop(image, rows, cols):
    """The source cropped as the task promises: centred, sides divisible by the grid."""
    w, h = image.width // cols * cols, image.height // rows * rows
    left, top = (image.width - w) // 2, (image.height - h) // 2
    return image.crop((left, top, left + w, top + h))


def _cut(image, rows, cols):
    """Equal tiles of ``image`` in raster order."""
    tw, th = image.width // cols, image.height // rows
    boxes = [(c * tw, r * th, (c + 1) * tw, (r + 1) * th) for r in range(rows) for c in range(cols)]
    return [image.crop(box) for box in boxes]


def _paste(tiles, rows, cols):
    tw, th = tiles[0].size
    canvas = Image.new("RGB", (tw * cols, th * rows))
    for i, tile in enumerate(tiles):
        canvas.paste(tile, ((i % cols) * tw, (i // cols) * th))
    return canvas


def _shown_pieces(example, rows, cols, composite):
    """The pieces in the order the policy sees them numbered, recovered from the prompt alone."""
    content = example.messages[0]["content"]
    images = [part["image"] for part in content if part["type"] == "image"]
    if composite:
        (image,) = images
        return _cut(image, rows, cols)
    labels = [content[i - 1]["text"] for i, part in enumerate(content) if part["type"] == "image"]
    assert labels == [f"Piece {i}:" for i in range(1, rows * cols + 1)]
    return images


@pytest.mark.parametrize("composite", [False, True])
@pytest.mark.parametrize("rows, cols", GRIDS)
def test_rendered_answer_rebuilds_the_source(rows, cols, composite):
    task = Jigsaw(rows=rows, cols=cols, composite=composite, think=True)
    for seed in range(4):
        # sizes no grid divides, so the centre crop is exercised
        item = make_item("image", seed=seed).resize((113 + seed, 85 + 2 * seed))
        example = task.make_example(item, random.Random(seed))
        answer, _ = answers.extract(task.render_answer(example), "tags", think=True)
        order = answers.parse_permutation(answer, rows * cols)
        tiles = answers.restore(_shown_pieces(example, rows, cols, composite), order)
        rebuilt = _paste(tiles, rows, cols)
        assert np.array_equal(np.asarray(rebuilt), np.asarray(_crop(item, rows, cols)))


def test_shuffles_differ_across_seeds():
    task = Jigsaw(rows=3, cols=3)
    answers_seen = {tuple(task.make_example(make_item("image"), random.Random(s)).answer) for s in range(10)}
    assert len(answers_seen) > 5


def test_composite_is_the_size_of_the_cropped_source():
    item = make_item("image").resize((101, 77))
    example = Jigsaw(rows=3, cols=4, composite=True).make_example(item, random.Random(0))
    (image,) = [part["image"] for part in example.messages[0]["content"] if part["type"] == "image"]
    assert image.size == (100, 75) == _crop(item, 3, 4).size


def _example_with_answer(task, truth):
    for seed in range(500):
        example = task.make_example(make_item("image"), random.Random(seed))
        if example.answer == truth:
            return example
    raise AssertionError(f"{truth} never drawn")


@pytest.mark.parametrize(
    "reward, accuracy",
    # truth 1, 2, 3, 4 answered 2, 1, 3, 4: two of four in place; footrule distance 2 of max
    # floor(16 / 2) = 8; of the 4 neighbour pairs (1|2, 3|4 side by side, 1/3, 2/4 one above the
    # other) only 3|4 is kept
    [("exact", 0.0), ("fraction", 0.5), ("footrule", 0.75), ("connections", 0.25)],
)
def test_reward_modes_on_one_swap(reward, accuracy):
    task = Jigsaw(reward=reward)
    example = _example_with_answer(task, [1, 2, 3, 4])
    parts = task.verify(example, "<answer>2, 1, 3, 4</answer>").parts
    assert parts == {
        "accuracy": accuracy,
        "exact": 0.0,
        "fraction": 0.5,
        "footrule": 0.75,
        "connections": 0.25,
        "format": 1.0,
    }


def test_one_swap_on_a_shuffled_truth():
    task = Jigsaw(rows=2, cols=2, reward="footrule", answer_format="bare")
    example = task.make_example(make_item("image"), random.Random(3))
    pred = list(example.answer)
    pred[0], pred[-1] = pred[-1], pred[0]  # swap the two ends: each label 3 slots off, distance 6 of max 8
    parts = task.verify(example, ", ".join(map(str, pred))).parts
    assert parts["accuracy"] == parts["footrule"] == pytest.approx(0.25)
    assert parts["fraction"] == 0.5 and parts["exact"] == 0.0


@pytest.mark.parametrize("answer", ["1, 1, 2, 3", "1, 2, 3", "1, 2, 3, 4, 5", "0, 1, 2, 3", "1, 2, 3, x"])
def test_non_permutations_earn_nothing(answer):
    task = Jigsaw(reward="fraction", answer_format="bare", format_weight=0.5)
    example = _example_with_answer(task, [1, 2, 3, 4])
    reward = task.verify(example, answer)
    # not a valid answer at all: no accuracy and no format reward
    assert reward.parts == {
        "accuracy": 0.0,
        "exact": 0.0,
        "fraction": 0.0,
        "footrule": 0.0,
        "connections": 0.0,
        "format": 0.0,
    }
    assert reward.total == 0.0


def test_partial_credit_scales_valid_wrong_orders_only():
    task = Jigsaw(reward="fraction", partial_credit=0.2, answer_format="bare", format_weight=0.2)
    example = _example_with_answer(task, [1, 2, 3, 4])
    # one swap: half the positions right -> 0.2 * 0.5, plus the format reward for a valid
    # permutation
    assert task.verify(example, "2, 1, 3, 4").total == pytest.approx(0.2 * 0.5 + 0.2)
    assert task.verify(example, "1, 2, 3, 4").total == pytest.approx(1.0 + 0.2)
    with pytest.raises(ValueError, match="partial_credit"):
        Jigsaw(partial_credit=1.5)


def test_digit_string_answer_is_accepted():
    task = Jigsaw(answer_format="bare")
    example = task.make_example(make_item("image"), random.Random(0))
    assert task.score(example, "".join(map(str, example.answer)))["exact"] == 1.0


def test_meta_records_the_grid_and_shown_order():
    example = Jigsaw(rows=2, cols=3).make_example(make_item("image"), random.Random(1))
    assert example.meta["rows"] == 2 and example.meta["cols"] == 3
    assert sorted(example.meta["shown"]) == list(range(6))
    assert example.answer == answers.shuffle_answer(example.meta["shown"])


def test_too_small_raises_skip_item():
    with pytest.raises(SkipItem):
        Jigsaw(rows=2, cols=2, min_tile=14).make_example(Image.new("RGB", (200, 27)), random.Random(0))
    Jigsaw(rows=2, cols=2, min_tile=14).make_example(Image.new("RGB", (28, 28)), random.Random(0))


def test_any_image_mode_is_converted():
    item = make_item("image").convert("RGBA")
    example = Jigsaw(composite=True).make_example(item, random.Random(0))
    images = [part["image"] for part in example.messages[0]["content"] if part["type"] == "image"]
    assert [image.mode for image in images] == ["RGB"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rows": 1, "cols": 1},
        {"rows": 0, "cols": 4},
        {"reward": "kendall"},
        {"min_tile": 0},
        {"mask_ratio": 0.5},
        {"mask_ratio": -0.1},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        Jigsaw(**kwargs)


@pytest.mark.parametrize(
    "truth, pred, rows, cols, kept",
    [
        ([1, 2, 3, 4], [1, 2, 3, 4], 2, 2, 1.0),
        ([1, 2, 3, 4], [2, 1, 4, 3], 2, 2, 0.5),  # columns swapped: both top-bottom pairs kept, no left-right one
        ([1, 2, 3, 4], [3, 4, 1, 2], 2, 2, 0.5),  # rows swapped: both left-right pairs kept
        ([1, 2, 3], [3, 1, 2], 1, 3, 0.5),  # the strip shifted: 1|2 still side by side, 2|3 not
        ([1, 2, 3], [2, 3, 1], 3, 1, 0.5),  # one column: 2 above 3 kept
        ([4, 2, 1, 3], [4, 2, 1, 3], 2, 2, 1.0),
        ([1, 2, 3, 4, 5, 6], [3, 1, 2, 6, 4, 5], 2, 3, 5 / 7),  # rows shifted: 1|2, 4|5 and all 3 columns kept
        # 1|2 now straddle a row break (end of row 1, start of row 2): not side by side; 1 is still
        # above 3
        ([1, 2, 3, 4], [4, 1, 2, 3], 2, 2, 0.25),
    ],
)
def test_neighbour_accuracy_by_hand(truth, pred, rows, cols, kept):
    assert grid.neighbour_accuracy(pred, truth, rows, cols) == pytest.approx(kept)


def test_connections_reward_pays_kept_neighbours():
    task = Jigsaw(rows=1, cols=3, reward="connections", answer_format="bare", format_weight=0.5)
    example = _example_with_answer(task, [1, 2, 3])
    assert task.verify(example, "3, 1, 2").total == pytest.approx(0.5 + 0.5)
    assert task.verify(example, "1, 2, 3").total == pytest.approx(1.5)


def test_mask_ratio_blacks_out_the_borders_as_jigsaw_r1_does():
    image = Image.new("RGB", (40, 20), (200, 100, 50))  # a 1 x 2 grid of 20 x 20 cells
    pixels = np.asarray(grid.mask_borders(image, 1, 2, 0.2))
    black = (pixels == 0).all(axis=-1)  # [20, 40]
    # int(20 * 0.2) = 4 pixels at the outer edges, 2 on each side of the inner seam
    assert black[:4].all() and black[-4:].all() and black[:, :4].all() and black[:, -4:].all()
    assert black[:, 18:22].all() and not black[4:16, 4:18].any() and not black[4:16, 22:36].any()
    assert np.asarray(image).min() == 50  # the source is not modified
    task = Jigsaw(rows=2, cols=2, composite=True, mask_ratio=0.2, answer_format="bare")
    example = task.make_example(make_item("image"), random.Random(0))  # 112 x 84: 56 x 42 cells
    (shown,) = [p["image"] for p in example.messages[0]["content"] if p["type"] == "image"]
    shown = np.asarray(shown)
    # int(0.2 * 42) = 8 rows, int(0.2 * 56) = 11 columns at the edges; half of each (4, 5) on both
    # sides of a seam
    assert (shown[:8] == 0).all() and (shown[38:46] == 0).all() and (shown[:, 51:61] == 0).all()
    assert shown[8:38, 11:51].min() > 0
    assert "blacked out" in example.prompt_text
    assert task.verify(example, task.answer_text(example)).parts["accuracy"] == 1.0
    tiles = Jigsaw(rows=2, cols=2, mask_ratio=0.25).make_example(make_item("image"), random.Random(0))
    first = np.asarray(next(p["image"] for p in tiles.messages[0]["content"] if p["type"] == "image"))
    assert (first[:10] == 0).all() and (first[:, -14:] == 0).all() and first[10:32, 14:42].min() > 0
