"""JigsawPair: the answered relation is the one between the two named tiles' original grid cells."""

import random

import numpy as np
import pytest

from tasks import JigsawPair, answers
from tasks.image import grid
from tests.helpers import make_item


def _origin(tile, originals):
    """Original (row, col) index of a shown tile, found by its pixels."""
    (index,) = [i for i, o in enumerate(originals) if np.array_equal(np.asarray(o), np.asarray(tile))]
    return index


@pytest.mark.parametrize("rows, cols, options", [(2, 1, 2), (1, 3, 2), (2, 2, 8), (3, 3, 8)])
def test_answer_is_the_relation_of_the_named_tiles(rows, cols, options):
    task = JigsawPair(rows=rows, cols=cols, answer_format="bare")
    letters = set()
    for seed in range(10):
        item = make_item("image", seed)
        example = task.make_example(item, random.Random(seed))
        assert len(example.meta["options"]) == options
        (image,) = [p["image"] for p in example.messages[0]["content"] if p["type"] == "image"]
        shown, originals = grid.cut(image, rows, cols, 1), grid.cut(item, rows, cols, 1)
        first, second = example.meta["pair"]
        (r1, c1), (r2, c2) = (divmod(_origin(shown[p - 1], originals), cols) for p in (first, second))
        relation = answers.parse_letter(task.render_answer(example), example.meta["options"])
        vertical = "above" if r1 < r2 else "below" if r1 > r2 else ""
        horizontal = "left" if c1 < c2 else "right" if c1 > c2 else ""
        assert all(word in relation for word in (vertical, horizontal) if word)
        assert ("directly" in relation) == (not vertical or not horizontal)
        letters.add(task.render_answer(example))
    assert len(letters) > 1


def test_separate_tiles_and_wrong_letters():
    task = JigsawPair(rows=2, cols=2, composite=False, answer_format="bare")
    example = task.make_example(make_item("image"), random.Random(0))
    images = [p for p in example.messages[0]["content"] if p["type"] == "image"]
    assert len(images) == 4
    right = task.render_answer(example)
    wrong = "A" if right != "A" else "B"
    assert task.verify(example, wrong).parts == {"accuracy": 0.0, "format": 1.0}
    assert task.verify(example, "I").parts["format"] == 0.0  # 8 options: A-H


def test_swap_transposes_the_grid_half_the_time():
    task = JigsawPair(rows=3, cols=1, swap=True)
    grids = [
        (e.meta["rows"], e.meta["cols"])
        for e in (task.make_example(make_item("image", s), random.Random(s)) for s in range(40))
    ]
    assert {(3, 1), (1, 3)} == set(grids) and 10 < grids.count((1, 3)) < 30
    for seed in range(6):
        example = task.make_example(make_item("image"), random.Random(seed))
        horizontal = example.meta["rows"] == 1
        assert ("left of" in example.meta["options"][0]) == horizontal


def test_shuffled_options_put_the_right_relation_at_any_letter():
    fixed, shuffled = JigsawPair(rows=2, cols=2), JigsawPair(rows=2, cols=2, shuffle_options=True)
    by_relation = {}
    for seed in range(40):
        example = shuffled.make_example(make_item("image", seed), random.Random(seed))
        assert sorted(example.meta["options"]) == sorted(
            fixed.make_example(make_item("image"), random.Random(0)).meta["options"]
        )
        assert shuffled.verify(example, shuffled.render_answer(example)).parts["accuracy"] == 1.0
        by_relation.setdefault(example.answer, set()).add(shuffled.answer_text(example))
        # the prompt lists the options in the shuffled order
        letter = shuffled.answer_text(example)
        assert (
            f"{letter}) {example.meta['pair'][0]} is {example.answer} {example.meta['pair'][1]}" in example.prompt_text
        )
    assert any(len(letters) > 1 for letters in by_relation.values())  # one relation, several letters
    for seed in range(10):  # fixed order: a relation always has the same letter
        example = fixed.make_example(make_item("image", seed), random.Random(seed))
        assert fixed.answer_text(example) == answers.letter(list(example.meta["options"]).index(example.answer))
        assert example.meta["options"] == fixed.make_example(make_item("image"), random.Random(0)).meta["options"]
