"""ACRE (`tasks.ACRE`): the re-asking with shuffled options, and the consistency-verified rewards by
hand."""

import random

import pytest

from tasks import ACRE, MultipleChoice, Question, Rotation

ANIMALS = ["cat", "dog", "bird"]


def pair(task: MultipleChoice) -> list:
    """The two askings of "Which animal barks?": options in the stored order, then reshuffled."""
    return task.make_examples(Question("Which animal barks?", ANIMALS, "dog"), random.Random(0))


def text_of(example) -> str:
    return example.messages[0]["content"][-1]["text"]


def test_reask_lists_the_options_in_another_order_and_keeps_the_answer():
    task = MultipleChoice(shuffle_choices=False, answer_format="bare", self_reward=ACRE())
    asked, reasked = pair(task)
    assert asked.meta["choices"] == ANIMALS and "B) dog" in text_of(asked)
    assert sorted(reasked.meta["choices"]) == sorted(ANIMALS) and reasked.meta["choices"] != ANIMALS
    assert reasked.answer == asked.answer == "dog"
    assert text_of(reasked) == text_of(asked).replace(
        "A) cat\nB) dog\nC) bird", "\n".join(f"{'ABC'[i]}) {c}" for i, c in enumerate(reasked.meta["choices"]))
    )
    # the same option under its two letters is one ballot
    assert task.canonical_answer(asked, "B") == task.canonical_answer(reasked, task.render_answer(reasked)) == "dog"


def letter(example, option: str) -> str:
    return "ABC"[example.meta["choices"].index(option)]


def test_only_right_answers_the_other_asking_agrees_with_are_paid():
    task = MultipleChoice(shuffle_choices=False, answer_format="bare", format_weight=0.5, self_reward=ACRE())
    asked, reasked = pair(task)
    # asked: dog, dog, cat, nothing -> majority dog; reasked: dog, cat, dog, bird -> majority dog
    first = [letter(asked, "dog"), letter(asked, "dog"), letter(asked, "cat"), "zz"]
    second = [letter(reasked, o) for o in ("dog", "cat", "dog", "bird")]
    rewards = task.verify_group([asked, reasked], [first, second])
    assert [r.total for r in rewards[0]] == [1.5, 1.5, 0.5, 0.0]  # right and agreed + format; wrong: format
    assert [r.total for r in rewards[1]] == [1.5, 0.5, 1.5, 0.5]
    assert rewards[0][0].parts["consistent"] == 0.5 and rewards[0][0].parts["abstained"] == 0.0
    assert rewards[1][0].parts["accuracy"] == 1.0 and rewards[1][1].parts["agreement"] == 0.0


def test_a_right_answer_the_other_asking_does_not_reach_earns_no_accuracy():
    task = MultipleChoice(shuffle_choices=False, answer_format="bare", self_reward=ACRE())
    asked, reasked = pair(task)
    first = [letter(asked, o) for o in ("dog", "cat", "cat", "cat")]  # majority cat
    second = [letter(reasked, o) for o in ("dog", "dog", "cat", "cat")]  # a 2-2 tie: no majority
    rewards = task.verify_group([asked, reasked], [first, second])
    assert [r.total for r in rewards[0]] == [0.0] * 4 and rewards[0][0].parts["abstained"] == 1.0
    # reasked's right answers disagree with asked's majority (cat); its cats agree but are wrong
    assert [r.total for r in rewards[1]] == [0.0] * 4 and rewards[1][2].parts["consistent"] == 0.5
    assert [r.parts["accuracy"] for r in rewards[1]] == [1.0, 1.0, 0.0, 0.0]  # the truth is still logged


def test_the_same_letter_in_both_askings_is_not_agreement():
    task = MultipleChoice(shuffle_choices=False, answer_format="bare", self_reward=ACRE())
    asked, reasked = pair(task)
    same = letter(asked, "dog")  # B: dog in the first asking, another option in the second
    assert reasked.meta["choices"]["ABC".index(same)] != "dog"
    rewards = task.verify_group([asked, reasked], [[same] * 3, [same] * 3])
    assert [r.total for r in rewards[0]] == [0.0] * 3  # right, but the second asking chose another option


def test_acre_refuses_a_task_it_cannot_reask_and_a_broken_pair():
    with pytest.raises(ValueError, match="reask"):
        Rotation(self_reward=ACRE())
    task = MultipleChoice(self_reward=ACRE())
    asked, _ = pair(task)
    with pytest.raises(ValueError, match="re-asking"):
        task.verify_group([asked], [["A"]])
