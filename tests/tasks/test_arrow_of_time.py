"""ArrowOfTime: backward examples really play the frames in reverse; both answers valid, one
right."""

import random

import numpy as np
import pytest

from tasks import ArrowOfTime, SkipItem, Video
from tests.helpers import make_item


def _video(example):
    (part,) = [part for part in example.messages[0]["content"] if part["type"] == "video"]
    return part["video"]


def test_backward_examples_are_reversed_and_forward_ones_are_not():
    item = Video(make_item("video").frames[:15], fps=4.0)  # odd: the last frame is dropped
    task = ArrowOfTime()
    directions = []
    for seed in range(200):
        example = task.make_example(item, random.Random(seed))
        expected = item.frames[:14][::-1] if example.answer == "backward" else item.frames[:14]
        assert np.array_equal(_video(example), expected)
        assert example.meta["reversed"] == (example.answer == "backward")
        directions.append(example.answer)
    assert 70 <= directions.count("backward") <= 130  # a fair coin


@pytest.mark.parametrize("labels, right, wrong", [("words", "forward", "backward"), ("letters", "A", "B")])
def test_both_answers_are_valid_and_only_one_is_right(labels, right, wrong):
    task = ArrowOfTime(labels=labels, answer_format="bare")
    example = next(
        e for s in range(50) if (e := task.make_example(make_item("video"), random.Random(s))).answer == "forward"
    )
    assert task.answer_text(example) == right
    assert task.score(example, right) == {"accuracy": 1.0}
    assert task.score(example, wrong) == {"accuracy": 0.0}


@pytest.mark.parametrize(
    "answer, accuracy",
    [
        ("backward", 1.0),
        ("Backward", 1.0),
        ("BACKWARD.", 1.0),
        ("(backward)", 1.0),
        ("forward", 0.0),
        ("backwards", None),
        ("reversed", None),
        ("forward backward", None),
        ("B", None),
        ("", None),
    ],
)
def test_word_parsing(answer, accuracy):
    task = ArrowOfTime(answer_format="bare")
    example = next(
        e for s in range(50) if (e := task.make_example(make_item("video"), random.Random(s))).answer == "backward"
    )
    assert task.score(example, answer) == (None if accuracy is None else {"accuracy": accuracy})


def test_letters_list_the_options():
    task = ArrowOfTime(labels="letters")
    example = task.make_example(make_item("video"), random.Random(0))
    assert "A) forward\nB) backward" in example.prompt_text
    assert task.score(example, "forward") is None and task.score(example, "C") is None
    assert task.score(example, "(b)") is not None


def test_unusable_videos_raise_skip_item():
    with pytest.raises(SkipItem):  # two usable frames are one Qwen-VL token: no order to see
        ArrowOfTime().make_example(Video(np.zeros((3, 8, 8, 3), np.uint8), fps=1.0), random.Random(0))
    ArrowOfTime().make_example(Video(np.zeros((4, 8, 8, 3), np.uint8), fps=1.0), random.Random(0))
    with pytest.raises(SkipItem):  # float frames
        ArrowOfTime().make_example(Video(np.zeros((8, 8, 8, 3)), fps=1.0), random.Random(0))
    with pytest.raises(SkipItem):  # no frame rate
        ArrowOfTime().make_example(Video(np.zeros((8, 8, 8, 3), np.uint8), fps=0.0), random.Random(0))


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        ArrowOfTime(labels="numbers")
