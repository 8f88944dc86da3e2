"""Every task is an SFT dataset: its demonstration (perfect answer, plus the templated reasoning a
task states when asked to think) earns the top reward; the jigsaws' reasoning spells out the answer
it leads to."""

import random

import pytest

import tasks
from tasks import Jigsaw, JigsawPair, JigsawSingle, Task
from tests.helpers import discover, make_item

TASKS = discover(tasks, Task)
FORMATS = [("tags", False), ("tags", True), ("boxed", True), ("bare", False)]


@pytest.mark.parametrize("answer_format, think", FORMATS, ids=[f"{f}-think{t:d}" for f, t in FORMATS])
@pytest.mark.parametrize("cls", TASKS, ids=lambda c: c.__name__)
def test_demonstration_earns_the_top_reward(cls, answer_format, think):
    task = cls(answer_format=answer_format, think=think, format_weight=0.5)
    example = task.make_example(make_item(cls.modality), random.Random(0))
    demonstration = task.demonstration(example)
    assert task.verify(example, demonstration).total == pytest.approx(task.max_reward)
    reasoning = task.reasoning(example)
    if think and reasoning:
        assert demonstration.startswith(f"<think>\n{reasoning}\n</think>\n")
    elif not think:
        assert demonstration == task.render_answer(example)


def test_jigsaw_reasoning_walks_the_positions():
    task = Jigsaw(rows=1, cols=3, answer_format="tags", think=True)
    example = task.make_example(make_item("image"), random.Random(0))
    labels = example.answer  # the shown piece each original position takes
    steps = [f"position {i + 1} (row 1, column {i + 1}) takes piece {label}" for i, label in enumerate(labels)]
    assert task.reasoning(example) == "In the original image " + "; ".join(steps) + "."


def test_jigsaw_pair_reasoning_states_both_origins_then_the_relation():
    task = JigsawPair(rows=1, cols=2, answer_format="tags", think=True)
    example = task.make_example(make_item("image"), random.Random(0))
    first, second = example.meta["pair"]
    origin = {piece: example.meta["shown"][piece - 1] + 1 for piece in (first, second)}  # 1-based columns
    expected = (
        f"Piece {first} comes from row 1, column {origin[first]} of the original image and piece {second} "
        f"from row 1, column {origin[second]}, so piece {first} is {example.answer} piece {second}."
    )
    assert task.reasoning(example) == expected
    relation = "directly left of" if origin[first] < origin[second] else "directly right of"
    assert example.answer == relation


def test_jigsaw_single_reasoning_names_the_position_asked_for():
    task = JigsawSingle(rows=1, cols=2, answer_format="tags", think=True)
    example = task.make_example(make_item("image"), random.Random(0))
    piece, answer = example.meta["piece"], example.answer
    assert task.reasoning(example) == (
        f"Piece {piece} shows the part at row 1, column {answer} of the original image, which is position {answer}."
    )
