"""EmbodiedInverseDynamics: lettered (fixed or shuffled options) or named answers over the agent's
action set."""

import random

import pytest

from tasks import EmbodiedInverseDynamics, FramePair, SkipItem
from tests.helpers import make_item


def test_fixed_letters_follow_the_action_set():
    task = EmbodiedInverseDynamics(shuffle=False, answer_format="bare")
    example = task.make_example(make_item("frame_pair"), random.Random(0))
    assert task.answer_text(example) == "D" and "D) right" in example.prompt_text
    assert task.verify(example, "D").parts == {"accuracy": 1.0, "format": 1.0}
    assert task.verify(example, "(a)").parts == {"accuracy": 0.0, "format": 1.0}
    assert task.verify(example, "F").parts["format"] == 0.0  # only five options


def test_shuffled_letters_change_with_the_rng_but_always_name_the_action():
    task = EmbodiedInverseDynamics(answer_format="bare")
    examples = [task.make_example(make_item("frame_pair"), random.Random(seed)) for seed in range(20)]
    assert len({task.answer_text(e) for e in examples}) > 1
    assert all(e.meta["options"][ord(task.answer_text(e)) - 65] == "right" for e in examples)


@pytest.mark.parametrize("answer, accuracy", [("right", 1.0), ("Right.", 1.0), ("left", 0.0)])
def test_named_answers(answer, accuracy):
    task = EmbodiedInverseDynamics(labels="names", answer_format="bare")
    example = task.make_example(make_item("frame_pair"), random.Random(0))
    assert task.verify(example, answer).parts == {"accuracy": accuracy, "format": 1.0}
    assert task.verify(example, "jump").parts["format"] == 0.0


def test_an_action_outside_the_set_is_skipped():
    item = make_item("frame_pair")
    with pytest.raises(SkipItem):
        EmbodiedInverseDynamics().make_example(
            FramePair(item.before, item.after, "jump", item.actions), random.Random(0)
        )
