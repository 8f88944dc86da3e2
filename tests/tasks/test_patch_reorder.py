"""PatchReorder: placing the shown patches in the answered order rebuilds the source image."""

import random

import numpy as np
import pytest

from tasks import PatchReorder, answers
from tasks.image import grid
from tasks.image.patch_reorder import slot_names
from tests.helpers import make_item


def _composite(example):
    (image,) = [p["image"] for p in example.messages[0]["content"] if p["type"] == "image"]
    return image


@pytest.mark.parametrize("spec", ["2x2", "1x3", "1x4", "3x1", "4x1", "2x3"])
def test_answer_rebuilds_the_source(spec):
    task = PatchReorder(grids=[spec], labels=False, answer_format="boxed", think=True)
    rows, cols = map(int, spec.split("x"))
    for seed in range(3):
        item = make_item("image", seed).resize((113, 97))
        example = task.make_example(item, random.Random(seed))
        answer, _ = answers.extract(task.render_answer(example), "boxed", think=True)
        labels = [int(t) for t in answer.split("-")]  # 0-based shown labels, one per original position
        shown = grid.cut(_composite(example), rows, cols, 1)
        rebuilt = grid.paste([shown[label] for label in labels], rows, cols)
        expected = grid.paste(grid.cut(item, rows, cols, 1), rows, cols)
        assert np.array_equal(np.asarray(rebuilt), np.asarray(expected))


def test_masked_patch_is_white_and_the_rest_still_rebuilds():
    task = PatchReorder(grids=["2x2"], mask=1.0, labels=False)
    item = make_item("image")
    example = task.make_example(item, random.Random(0))
    shown = grid.cut(_composite(example), 2, 2, 1)
    masked = example.meta["masked"]
    assert np.all(np.asarray(shown[masked]) == 255)
    originals = grid.cut(item, 2, 2, 1)
    for slot, label in enumerate(example.answer):
        if label != masked:
            assert np.array_equal(np.asarray(shown[label]), np.asarray(originals[slot]))
    assert "masked completely by white" in example.messages[0]["content"][-1]["text"]


def test_labels_mark_each_patch_at_its_corner_only():
    plain = PatchReorder(labels=False).make_example(make_item("image"), random.Random(1))
    marked = PatchReorder(labels=True).make_example(make_item("image"), random.Random(1))
    a, b = np.asarray(_composite(plain)), np.asarray(_composite(marked))
    assert plain.answer == marked.answer and not np.array_equal(a, b)
    # away from the borders and the label corner, patches are untouched
    h, w = a.shape[0] // 2, a.shape[1] // 2
    for r in range(2):
        for c in range(2):
            assert np.array_equal(
                a[r * h + h // 2 : (r + 1) * h - 3, c * w + 3 : (c + 1) * w - 3],
                b[r * h + h // 2 : (r + 1) * h - 3, c * w + 3 : (c + 1) * w - 3],
            )


def test_exact_reward_and_graded_parts():
    task = PatchReorder(answer_format="bare", format_weight=0.1)
    example = task.make_example(make_item("image"), random.Random(2))
    truth = list(example.answer)
    swapped = truth[:]
    swapped[0], swapped[1] = swapped[1], swapped[0]
    parts = task.verify(example, "-".join(map(str, swapped))).parts
    assert parts["accuracy"] == 0.0 and parts["fraction"] == 0.5 and parts["format"] == 1.0
    assert task.verify(example, "-".join(map(str, truth))).total == pytest.approx(1.1)
    assert task.verify(example, "1-2-3-4").parts["format"] == 0.0  # labels are 0-based: 4 is not one


def test_grids_are_drawn_by_weight_and_named_in_the_prompt():
    task = PatchReorder(grids=["2x2", "1x3", "4x1"], grid_weights=[1, 1, 2])
    seen = [
        (e.meta["rows"], e.meta["cols"])
        for e in (task.make_example(make_item("image"), random.Random(s)) for s in range(80))
    ]
    assert {(2, 2), (1, 3), (4, 1)} == set(seen) and seen.count((4, 1)) > 25
    assert slot_names(2, 2) == "TopLeft-TopRight-BottomLeft-BottomRight"
    assert slot_names(1, 3) == "Left-Middle-Right"
    assert slot_names(4, 1) == "Top-Middle1-Middle2-Bottom"


@pytest.mark.parametrize(
    "spec, kind, layout",
    [
        ("1x3", "3 shuffled horizontal strips", "'Left-Middle-Right'"),
        ("4x1", "4 shuffled vertical strips", "'Top-Middle1-Middle2-Bottom'"),
        ("2x2", "4 shuffled patches", "'TopLeft-TopRight-"),
    ],
)
def test_strips_are_named_as_spatial_ssrl_names_them(spec, kind, layout):
    # Spatial-SSRL: one row of strips is "horizontal strips ... 'Left-Middle-Right'", one column is
    # vertical
    prompt = PatchReorder(grids=[spec]).make_example(make_item("image"), random.Random(0)).prompt_text
    assert kind in prompt and layout in prompt


@pytest.mark.parametrize(
    "kwargs",
    [
        {"grids": ["2by2"]},
        {"grids": ["1x1"]},
        {"grids": []},
        {"mask": 2.0},
        {"grid_weights": [1, 2]},
        {"reward": "kendall"},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        PatchReorder(**kwargs)
