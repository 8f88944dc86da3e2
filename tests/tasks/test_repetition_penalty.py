"""The repetition penalty (Visual Jigsaw): a long line repeated more than 3 times in a row costs the
penalty."""

import random

import pytest

from tasks import Jigsaw, Task, answers
from tasks.reading import repeats_lines
from tests.helpers import make_item

LINE = "the top left tile shows the sky and a roof"  # 10 words


@pytest.mark.parametrize(
    "text, repeats",
    [
        ("\n".join([LINE] * 4), True),
        ("\n".join([LINE] * 3), False),
        ("\n".join(["one two three four five six seven"] * 4), True),  # exactly 7 words
        ("\n".join(["one two three four five six"] * 9), False),  # 6 words: too short to count
        ("\n\n".join([LINE] * 4), True),  # blank lines are passed over
        ("\n".join([LINE, LINE, "ok", LINE, LINE]), False),  # a short line breaks the run
        ("\n".join([LINE, LINE.upper(), "  " + LINE + " ", LINE]), True),  # case and outer spaces ignored
        ("\n".join([LINE, LINE, LINE, LINE + " too"]), False),
        (LINE * 4, False),  # one line
    ],
)
def test_repeated_lines_by_hand(text, repeats):
    assert repeats_lines(text) is repeats


def _jigsaw_example(**kwargs):
    task = Jigsaw(
        rows=3,
        cols=3,
        reward="fraction",
        partial_credit=0.2,
        min_tile=1,
        answer_format="tags",
        think=True,
        format_weight=0.2,
        **kwargs,
    )
    return task, task.make_example(make_item("image"), random.Random(0))


def test_visual_jigsaw_scores_with_the_penalty():
    task, example = _jigsaw_example(repetition_penalty=0.5)
    right = task.answer_text(example)
    loop = "\n" + "\n".join([LINE] * 4) + "\n"  # on lines of their own, apart from the tags
    exact = task.verify(example, f"<think>{loop}</think><answer>{right}</answer>")
    assert exact.total == pytest.approx(1.0 + 0.2 - 0.5) and exact.parts["repetition"] == 1.0
    clean = task.verify(example, f"<think>{LINE}</think><answer>{right}</answer>")
    assert clean.total == pytest.approx(1.2) and clean.parts["repetition"] == 0.0
    truth = list(example.answer)
    truth[0], truth[1] = truth[1], truth[0]  # 7 of 9 in place: 0.2 x 7/9 partial credit
    swapped = task.verify(example, f"<think>{loop}</think><answer>{answers.order_text(truth)}</answer>")
    assert swapped.total == pytest.approx(0.2 * 7 / 9 + 0.2 - 0.5)
    junk = task.verify(example, loop)  # no answer at all: zoo still charges the penalty
    assert junk.total == pytest.approx(-0.5) and junk.parts["format"] == 0.0


def test_no_penalty_and_no_part_by_default():
    task, example = _jigsaw_example()
    reward = task.verify(example, "\n".join([LINE] * 5))
    assert "repetition" not in reward.parts and reward.total == 0.0


def test_penalty_applies_to_iou_tasks_too():
    from PIL import Image

    from tasks import Referring, ReferringGrounding

    task = ReferringGrounding(coords="normalized", answer_format="bare", format_weight=0.5, repetition_penalty=0.5)
    item = Referring(Image.new("RGB", (100, 100)), [("the box", [0, 0, 50, 50])])
    example = task.make_example(item, random.Random(0))
    reward = task.verify(example, "[0, 0, 500, 1000]")  # IoU 0.5
    assert reward.total == pytest.approx(0.5 + 0.5)
    looped = task.verify(example, "\n".join([LINE] * 4) + "\n[0, 0, 500, 1000]")
    assert looped.total == pytest.approx(-0.5) and looped.parts["repetition"] == 1.0  # not an answer: 0 - 0.5


def test_negative_penalty_is_rejected():
    class Echo(Task):
        name, modality = "echo", "image"

        def make_example(self, item, rng):
            raise NotImplementedError

        def answer_text(self, example):
            return ""

        def score(self, example, answer):
            return {"accuracy": 1.0}

    with pytest.raises(ValueError, match="repetition_penalty"):
        Echo(repetition_penalty=-0.5)
