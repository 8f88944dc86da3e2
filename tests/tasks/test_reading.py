"""The reading options of every task (`tasks.reading`): where the answer is found, what the format
part pays for, the think block and Jigsaw-R1's letters; the defaults read as strictly as before."""

import random

import pytest

from datamodules.base import with_options
from tasks import Jigsaw, Rotation, reading
from tests.helpers import make_item


@pytest.mark.parametrize(
    "answer, read",
    [("The answer is C", "C"), ("b", "B"), (" d ", "D"), ("(b)", "(b)"), ("The answer is b", "T"), ("12", "12")],
)
def test_last_capital(answer, read):
    assert reading.last_capital(answer) == read


@pytest.mark.parametrize(
    "completion, answer_format, think, shaped",
    [
        ("<answer>x</answer>", "tags", False, True),
        ("<answer></answer>", "tags", False, True),
        (" <answer>x</answer>", "tags", False, False),  # R1-AQA's fullmatch: no blank around
        ("<think>a</think>\n<answer>x</answer>", "tags", True, True),
        ("<think>a</think> b <answer>x</answer>", "tags", True, False),
        ("<think>a</think><answer>x</answer> more", "tags", True, False),
        ("<think>a</think>so \\boxed{x} done", "boxed", True, True),
        ("<think>a\\boxed{x}</think>", "boxed", True, False),
        ("<think>a</think>\\boxed{x", "boxed", True, False),
        ("\\boxed{x}", "boxed", True, False),
        ("so \\boxed{x}", "boxed", False, True),
    ],
)
def test_pattern(completion, answer_format, think, shaped):
    assert reading.pattern(completion, answer_format, think) is shaped


def read(completion, answer_format="tags", search="last", require_think=False):
    return reading.Reading(answer_format, True, require_think, search).answer(completion)


@pytest.mark.parametrize(
    "completion, answer_format, search, require_think, answer",
    [
        ("a <answer> 1 </answer> b <answer>2</answer>", "tags", "first", False, "1"),
        ("a <answer> 1 </answer> b <answer>2</answer>", "tags", "last", False, "2"),
        ("<answer>1</answer><answer>2", "tags", "last", False, "1"),
        ("<answer></answer>", "tags", "first", False, None),
        ("<answer><think></answer>", "tags", "first", False, None),
        ("<answer>1</answer>", "tags", "first", True, None),
        ("<think>t</think>x<answer>1</answer>", "tags", "first", True, "1"),
        ("<think><answer>1</answer></think><answer>2</answer>", "tags", "first", True, "2"),
        ("\\boxed{1} and \\boxed{\\frac{1}{2}}.", "boxed", "last", False, "\\frac{1}{2}"),
        ("\\boxed{1} and \\boxed{\\frac{1}{2}}.", "boxed", "first", False, "1"),
        ("\\boxed{1} and \\boxed{2", "boxed", "last", False, None),
        ("\\boxed{1}<think>t</think>\\boxed{2}", "boxed", "last", False, "2"),
    ],
)
def test_search(completion, answer_format, search, require_think, answer):
    assert read(completion, answer_format, search, require_think) == answer


@pytest.mark.parametrize(
    "kwargs",
    [
        {"answer_format": "bare", "answer_search": "last"},
        {"answer_format": "bare", "format_pays": "pattern"},
        {"answer_search": "anywhere"},
        {"format_pays": "shape"},
        {"think": False, "require_think": True},
    ],
)
def test_bad_options_raise(kwargs):
    with pytest.raises(ValueError):
        Rotation(**kwargs)


def test_defaults_read_strictly():
    task = Rotation(answer_format="tags", think=True, format_weight=0.5)
    example = task.make_example(make_item("image"), random.Random(0))
    right = task.answer_text(example)
    assert task.reading.strict
    assert task.verify(example, f"<think>t</think><answer>{right}</answer>").total == 1.5
    assert task.verify(example, f"So: <think>t</think><answer>{right}</answer>").total == 0.0
    assert task.verify(example, f"<answer>{right}</answer>").total == 0.0


def test_format_still_wants_the_think_block_the_accuracy_does_not():
    task = Rotation(answer_format="tags", think=True, format_weight=0.5, require_think=False, answer_search="first")
    example = task.make_example(make_item("image"), random.Random(0))
    right = task.answer_text(example)
    assert task.verify(example, f"<answer>{right}</answer>").parts == {"accuracy": 1.0, "format": 0.0}
    assert task.verify(example, f"<think>t</think><answer>{right}</answer>").total == 1.5
    assert task.verify(example, f"<think>t</think>So <answer>{right}</answer>").total == 1.0


def test_ballots_read_the_answer_as_the_accuracy_does():
    task = Jigsaw(rows=1, cols=3, answer_format="boxed", think=True, answer_search="last", require_think=False)
    example = task.make_example(make_item("image"), random.Random(0))
    assert task.canonical_answer(example, "\\boxed{1 2 3}, no: \\boxed{3, 1, 2}") == (3, 1, 2)
    assert task.canonical_answer(example, "\\boxed{3 1 2}") == (3, 1, 2)


def test_copies_keep_the_reading_options():
    task = Rotation(answer_format="boxed", think=True, answer_search="last", format_pays="pattern", require_think=False)
    copy = with_options(task, format_weight=0.1)
    assert copy.reading == task.reading
    assert with_options(Rotation(think=True, last_letter=True), think=False).reading.require_think is False
