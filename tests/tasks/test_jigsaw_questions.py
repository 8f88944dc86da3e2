"""Jigsaw-R1's multiple-choice, single-piece and box questions: answers follow the pixels, scores by
hand."""

import dataclasses
import random

import numpy as np
import pytest
from PIL import Image

from tasks import JigsawBox, JigsawMultiple, JigsawSingle, SkipItem
from tasks.image import grid
from tasks.image.jigsaw_multiple import distractors, grid_text
from tests.helpers import make_item


def _image(example):
    (image,) = [p["image"] for p in example.messages[0]["content"] if p["type"] == "image"]
    return image


def _original_slots(example, item, rows, cols):
    """For each shown piece (raster order of the composite), the original slot its pixels come
    from."""
    shown, originals = grid.cut(_image(example), rows, cols, 1), grid.cut(item, rows, cols, 1)
    return [next(i for i, o in enumerate(originals) if np.array_equal(np.asarray(o), np.asarray(s))) for s in shown]


@pytest.mark.parametrize("rows, cols", [(2, 2), (3, 1), (2, 3)])
def test_multiple_truth_is_the_forward_order_and_one_option(rows, cols):
    task = JigsawMultiple(rows=rows, cols=cols, choices=4, answer_format="bare")
    letters = set()
    for seed in range(6):
        item = make_item("image", seed)
        example = task.make_example(item, random.Random(seed))
        # Jigsaw-R1's forward convention: at each shown position, the original position of the piece
        # there
        assert example.answer == [slot + 1 for slot in _original_slots(example, item, rows, cols)]
        options = example.meta["options"]
        assert len(options) == 4 and len({tuple(o) for o in options}) == 4 and options.count(example.answer) == 1
        assert all(sorted(o) == list(range(1, rows * cols + 1)) for o in options)
        letter = task.answer_text(example)
        assert f"({letter})\n{grid_text(example.answer, cols)}\n" in example.prompt_text
        letters.add(letter)
        wrong = "A" if letter != "A" else "B"
        assert task.verify(example, wrong).parts == {"accuracy": 0.0, "format": 1.0}
        assert task.verify(example, "E").parts["format"] == 0.0  # 4 options: A-D
    assert len(letters) > 1


def test_grid_text_and_distractors():
    assert grid_text([2, 1, 4, 3, 6, 5], 3) == "2 1 4\n3 6 5"
    rng = random.Random(0)
    assert distractors([1, 2], 1, rng) == [[2, 1]]  # the only other order
    for truth in ([3, 1, 2], list(range(1, 10))):  # enumerated (3! orders) and by rejection (9 pieces)
        drawn = distractors(truth, 5, rng)
        assert len({tuple(d) for d in drawn}) == 5 and truth not in drawn
    with pytest.raises(ValueError, match="choices"):
        JigsawMultiple(rows=2, cols=1, choices=3)  # 2! = 2 orders
    with pytest.raises(ValueError, match="choices"):
        JigsawMultiple(rows=3, cols=3, choices=27)


def test_single_answer_is_the_original_position_of_the_named_piece():
    task = JigsawSingle(rows=2, cols=2, answer_format="bare", format_weight=0.5)
    asked = set()
    for seed in range(8):
        item = make_item("image", seed)
        example = task.make_example(item, random.Random(seed))
        piece = example.meta["piece"]
        assert f"piece {piece} belong" in example.prompt_text
        assert example.answer == _original_slots(example, item, 2, 2)[piece - 1] + 1
        asked.add(piece)
    assert len(asked) > 1


@pytest.mark.parametrize(
    "answer, parts",
    [
        ("3", {"accuracy": 1.0, "format": 1.0}),
        (" 3 ", {"accuracy": 1.0, "format": 1.0}),
        ("1", {"accuracy": 0.0, "format": 1.0}),
        ("4", {"accuracy": 0.0, "format": 1.0}),
        ("5", None),
        ("0", None),
        ("+3", None),
        ("3.", None),
        ("three", None),
        ("3, 1", None),
        ("(3)", None),
    ],
)
def test_single_scores_by_hand(answer, parts):
    task = JigsawSingle(rows=2, cols=2, answer_format="bare")
    example = dataclasses.replace(task.make_example(make_item("image"), random.Random(0)), answer=3)
    got = task.verify(example, answer).parts
    assert got == (parts or {"accuracy": 0.0, "format": 0.0})


def _box_example(seed=0, **kwargs):
    task = JigsawBox(**{"rows": 2, "cols": 2, "answer_format": "bare", "format_weight": 0.5, **kwargs})
    item = make_item("image", seed)
    return task, item, task.make_example(item, random.Random(seed))


def test_box_content_now_in_the_region_came_from_the_answer_box():
    for seed in range(6):
        task, item, example = _box_example(seed)
        source, shown = np.asarray(item), np.asarray(_image(example))
        boxes, order, region = example.meta["boxes"], example.meta["order"], example.meta["region"]
        assert order[region - 1] != region - 1, "the asked region's box always moves"
        x1, y1, x2, y2 = boxes[region - 1]
        t1, u1, t2, u2 = example.answer
        assert np.array_equal(shown[y1:y2, x1:x2], source[u1:u2, t1:t2])
        assert (x2 - x1, y2 - y1) == (t2 - t1, u2 - u1)
        # every box lies in its own region; outside the boxes nothing changed
        width, height = 112 // 2, 84 // 2
        outside = np.ones(source.shape[:2], bool)
        for i, (a, b, c, d) in enumerate(boxes):
            assert a >= (i % 2) * width and c <= (i % 2 + 1) * width and b >= (i // 2) * height
            assert d <= (i // 2 + 1) * height
            outside[b:d, a:c] = False
        assert np.array_equal(shown[outside], source[outside])
        assert f"now in region {region}?" in example.prompt_text and "112 x 84 image" in example.prompt_text


def test_box_iou_scores_by_hand():
    task, _, example = _box_example()
    example = dataclasses.replace(example, answer=[66, 20, 98, 36])  # 32 x 16
    right = task.verify(example, "[66, 20, 98, 36]")
    assert right.parts == {"accuracy": 1.0, "iou": 1.0, "format": 1.0} and right.total == pytest.approx(1.5)
    half = task.verify(example, "66, 20, 98, 28")  # the top half: 256 / 512
    assert half.parts["iou"] == pytest.approx(0.5) and half.parts["accuracy"] == 1.0
    assert half.total == pytest.approx(0.5 + 0.5)
    shifted = task.verify(example, "[70, 20, 102, 36]")  # overlap 28 x 16 = 448 of 512 + 512 - 448 = 576
    assert shifted.parts["iou"] == pytest.approx(448 / 576)
    low = task.verify(example, "[82, 20, 98, 36]")  # a 16 x 16 box inside the truth: 256 / 512
    assert low.parts["iou"] == pytest.approx(0.5)
    apart = task.verify(example, "[0, 0, 10, 10]")
    assert apart.parts == {"accuracy": 0.0, "iou": 0.0, "format": 1.0}
    for invalid in ["[82, 20, 114, 36]", "[66, 20, 98]", "[98, 20, 66, 36]", "region 2"]:  # off the image, ...
        assert task.verify(example, invalid).parts == {"accuracy": 0.0, "iou": 0.0, "format": 0.0}


def test_box_keeps_clear_of_masked_borders_and_is_shown_at_multiples_of_28():
    task = JigsawBox(rows=2, cols=1, mask_ratio=0.2, answer_format="bare")
    item = make_item("image").resize((125, 90))  # shown at 112 x 84 (multiples of 28): regions 112 x 42
    for seed in range(6):
        example = task.make_example(item, random.Random(seed))
        assert _image(example).size == (112, 84) and example.meta["bounds"] == [112, 84]
        for i, (x1, y1, x2, y2) in enumerate(example.meta["boxes"]):
            # int(0.2 * 112) = 22 at the left and right, int(0.2 * 42) = 8 at the outer edge, 4 at
            # the seam
            top, bottom = (8, 4) if i == 0 else (4, 8)
            assert x1 >= 22 and x2 <= 112 - 22 and y1 >= 42 * i + top and y2 <= 42 * (i + 1) - bottom
        assert "blacked out" in example.prompt_text
    with pytest.raises(SkipItem):
        JigsawBox(rows=3, cols=3, min_tile=14).make_example(Image.new("RGB", (120, 30)), random.Random(0))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rows": 1, "cols": 1},
        {"box_size": [0.5, 0.2]},
        {"box_size": [0.0, 0.5]},
        {"mask_ratio": 0.5},
        {"threshold": 0.0},
    ],
)
def test_box_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        JigsawBox(**kwargs)
