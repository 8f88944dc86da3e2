"""SRL's step-wise task (`tasks.ExpertSteps`): the expert's first steps in the prompt, one step
asked for, SRL's sequence-similarity reward (hand-computed), and -1 for an invalid step when
asked."""

import random

import pytest

from tasks import ExpertSteps, Jigsaw, Rotation, TemporalJigsaw
from tasks.expert_steps import similarity
from tests.helpers import make_item


def test_similarity_is_srl_two_m_over_t():
    # "abcd" / "abed": matching blocks "ab" and "d", M = 3, T = 8 -> 6 / 8
    assert similarity("abcd", "abed") == pytest.approx(0.75)
    assert similarity("12", "2") == pytest.approx(2 * 1 / 3)  # one matching element of 2 + 1
    assert similarity("3", "3") == 1.0 and similarity("3", "4") == 0.0


def test_the_prompt_gives_the_expert_steps_before_the_one_asked_for():
    task = ExpertSteps(Jigsaw(rows=1, cols=4), answer_format="tags")
    examples = [task.make_example(make_item("image"), random.Random(seed)) for seed in range(20)]
    assert {ex.meta["step"] for ex in examples} == {1, 2, 3}  # never the last step, which the others fix
    for ex in examples:
        order, step = ex.meta["order"], ex.meta["step"]
        assert ex.task == "jigsaw_steps" and ex.answer == order[step - 1] and ex.meta["given"] == order[: step - 1]
        text = ex.messages[0]["content"][-1]["text"]
        assert f"Give only number {step} of the answer: one number from 1 to 4." in text
        assert text.endswith(task.instruction()) and text.count("<answer>") == 1  # the wrapped instruction is gone
        if step > 1:
            assert (
                "The first {} numbers of that answer are: {}.".format(step - 1, ", ".join(map(str, order[: step - 1])))
                in text
            )


def test_reward_is_the_similarity_and_an_invalid_step_pays_the_penalty():
    task = ExpertSteps(Jigsaw(rows=3, cols=4), answer_format="tags", format_weight=0.5, format_penalty=1.0)
    example = next(
        ex for seed in range(200) if (ex := task.make_example(make_item("image"), random.Random(seed))).answer == 12
    )
    right = task.verify(example, "<answer>12</answer>")
    assert right.total == pytest.approx(1.5) and right.parts["exact"] == 1.0
    near = task.verify(example, "<answer>2</answer>")  # "2" in "12": M = 1, T = 3
    assert near.parts["accuracy"] == pytest.approx(2 / 3) and near.parts["exact"] == 0.0
    assert near.total == pytest.approx(2 / 3 + 0.5)
    for junk in ("<answer>13</answer>", "<answer>1, 2</answer>", "12", "<answer>0</answer>"):
        reward = task.verify(example, junk)  # off the labels, two steps, no tags, no such piece
        assert reward.total == pytest.approx(-1.0) and reward.parts["format"] == 0.0


def test_it_takes_the_items_of_the_task_it_wraps():
    task = ExpertSteps(TemporalJigsaw(clips=3), answer_format="bare")
    assert task.modality == "video" and task.name == "temporal_jigsaw_steps"
    example = task.make_example(make_item("video"), random.Random(0))
    assert task.verify(example, task.render_answer(example)).total == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [Rotation(), TemporalJigsaw(clips=3, style="choice")], ids=["rotation", "choice"])
def test_a_task_without_a_numbered_order_is_refused(bad):
    with pytest.raises(ValueError, match="ordering task"):
        ExpertSteps(bad)
