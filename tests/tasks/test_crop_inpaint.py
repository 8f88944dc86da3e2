"""CropInpaint: pasting the answered option into the hole restores the image; every distractor does
not."""

import random

import numpy as np
import pytest
from PIL import Image

from tasks import CropInpaint, SkipItem, answers
from tests.helpers import make_item


def _parts(example):
    return [p["image"] for p in example.messages[0]["content"] if p["type"] == "image"]


def test_the_answered_option_fills_the_hole_exactly():
    task = CropInpaint(answer_format="tags")
    letters = set()
    for seed in range(10):
        item = make_item("image", seed)
        example = task.make_example(item, random.Random(seed))
        holed, *options = _parts(example)
        box = example.meta["box"]
        assert np.all(np.asarray(holed.crop(box)) == 0)
        answer, _ = answers.extract(task.render_answer(example), "tags", False)
        letters.add(answer)
        for i, option in enumerate(options):
            filled = holed.copy()
            filled.paste(option, box[:2])
            restored = np.array_equal(np.asarray(filled), np.asarray(item))
            assert restored == (answers.letter(i) == answer)
    assert len(letters) > 1


def test_distractors_are_three_distinct_kinds():
    task = CropInpaint(distractors=["rotate_left", "rotate_right", "interior"])
    example = task.make_example(make_item("image"), random.Random(0))
    assert sorted(example.meta["kinds"]) == ["interior", "original", "rotate_left", "rotate_right"]
    assert all(option.size == _parts(example)[1].size for option in _parts(example)[1:])


def test_symmetric_crops_are_skipped_and_bad_arguments_raise():
    with pytest.raises(SkipItem):
        CropInpaint().make_example(Image.new("RGB", (64, 64), (5, 5, 5)), random.Random(0))
    with pytest.raises(SkipItem, match="min_size"):
        CropInpaint(min_size=50).make_example(make_item("image"), random.Random(0))
    with pytest.raises(ValueError):
        CropInpaint(distractors=["interior", "rotate_left"])
