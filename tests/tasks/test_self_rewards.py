"""Label-free self-rewards on canned rollouts, each value computed by hand: majority vote (TTRL),
Co-Reward's cross-question agreement, GUI-RC's region consistency; their collapse guards; the true
accuracy beside them."""

import random

import numpy as np
import pytest

from tasks import (
    CoReward,
    Example,
    ExpertSteps,
    GUIGrounding,
    Jigsaw,
    MajorityVote,
    MultipleChoice,
    ObjectCounting,
    Question,
    ReferringGrounding,
    RegionConsistency,
    Rotation,
)
from tasks.answers import canonical_text
from tasks.self_rewards import ROLE_KEY
from tests.helpers import make_item

ANIMALS = ["cat", "dog", "cow", "ant"]  # dog (B) is right


def mcq(self_reward, **kwargs):
    """Letters in the stored order (A cat, B dog, C cow, D ant), 0.5 format weight."""
    return MultipleChoice(shuffle_choices=False, format_weight=0.5, self_reward=self_reward, **kwargs)


def question(task, text="Which animal barks?", rewrite=""):
    return task.make_example(Question(text, ANIMALS, "dog", rewrite=rewrite), random.Random(0))


def tags(*letters):
    return [f"<answer>{x}</answer>" if x is not None else "I am not sure" for x in letters]


def totals(rewards):
    return [r.total for r in rewards]


def part(rewards, name):
    return [r.parts[name] for r in rewards]


def test_text_ballots_ignore_case_spaces_brackets_and_a_final_stop():
    assert canonical_text(" (A). ") == canonical_text("a") == "a"
    assert canonical_text("1, 2, 3") == "1,2,3" != canonical_text("1,2,4")


def test_majority_vote_pays_agreement_with_the_plurality_and_logs_the_true_accuracy():
    task = mcq(MajorityVote())
    example = question(task)
    # ballots a, a, b, (none), a: A wins with 3 of 5; the invalid completion never votes
    [rewards] = task.verify_group([example], [tags("A", "a", "B", None, "(A)")])
    assert part(rewards, "agreement") == [1, 1, 0, 0, 1]
    assert totals(rewards) == [1.5, 1.5, 0.5, 0.0, 1.5]  # agreement + 0.5 x format
    assert part(rewards, "accuracy") == [0, 0, 1, 0, 0]  # the truth: B
    assert part(rewards, "label_accuracy") == [0.0] * 5  # the pseudo-label A is wrong
    assert part(rewards, "majority") == [0.6] * 5 and part(rewards, "abstained") == [0.0] * 5


def test_a_tie_abstains_and_pays_only_format():
    task = mcq(MajorityVote())
    [rewards] = task.verify_group([question(task)], [tags("A", "B", None)])
    assert totals(rewards) == [0.5, 0.5, 0.0] and part(rewards, "abstained") == [1.0] * 3
    assert "label_accuracy" not in rewards[0].parts


def test_min_ratio_abstains_on_a_weak_majority():
    completions = tags("B", "B", "A", "C", None)  # B holds 2 of 5 = 0.4
    for ratio, paid in ((0.4, [1, 1, 0, 0, 0]), (0.5, [0, 0, 0, 0, 0])):
        task = mcq(MajorityVote(min_ratio=ratio))
        [rewards] = task.verify_group([question(task)], [completions])
        assert part(rewards, "agreement") == paid


def test_one_answer_winning_most_questions_of_a_batch_abstains():
    task = mcq(MajorityVote(max_label_share=0.5))
    examples = [question(task, f"Question {k}?") for k in range(3)]
    groups = [tags("A", "A", "B"), tags("A", "A", "C"), tags("B", "B", "A")]
    rewards = task.verify_group(examples, groups)
    # A wins 2 of 3 questions > 0.5 x 3: both abstain; B wins one and keeps its pseudo-label
    assert [part(r, "abstained")[0] for r in rewards] == [1.0, 1.0, 0.0]
    assert part(rewards[2], "agreement") == [1, 1, 0] and part(rewards[2], "label_accuracy")[0] == 1.0
    unguarded = mcq(MajorityVote()).verify_group(examples, groups)
    assert [part(r, "abstained")[0] for r in unguarded] == [0.0, 0.0, 0.0]


def rotation_example(task, angle=90):
    return Example([], angle, task.name, {"angle": angle, "choices": [0, 90, 180, 270]})


def test_ballots_are_the_parsed_angle_not_its_spelling():
    task = Rotation(self_reward=MajorityVote())
    group = tags("90", "90 degrees", "90\u00b0", "180")
    [rewards] = task.verify_group([rotation_example(task)], [group])
    assert part(rewards, "agreement") == [1, 1, 1, 0] and part(rewards, "majority") == [0.75] * 4
    assert part(rewards, "accuracy") == [1, 1, 1, 0]
    assert part(rewards, "label_accuracy") == [1.0] * 4


def test_co_reward_ballots_are_the_parsed_angle_not_its_spelling():
    task = Rotation(self_reward=CoReward())
    pair = task.make_examples(make_item("image"), random.Random(0))
    # each group says 90 twice, spelled two ways, and 180 once: both elect 90, paying the other
    groups = [tags("90", "90 degrees", "180"), tags("90\u00b0", "180", "90")]
    asked, rewritten = task.verify_group(pair, groups)
    assert part(asked, "agreement") == [1, 1, 0] and part(rewritten, "agreement") == [1, 0, 1]
    assert part(asked, "majority")[0] == part(rewritten, "majority")[0] == pytest.approx(2 / 3)


def jigsaw_1x3(self_reward):
    """A 1x3 jigsaw whose right order is 3, 1, 2 (the pieces shown are slots 2, 3, 1)."""
    task = Jigsaw(rows=1, cols=3, self_reward=self_reward)
    return task, Example([], [3, 1, 2], task.name, {"rows": 1, "cols": 3, "shown": [1, 2, 0]})


def test_ballots_are_the_parsed_order_not_its_spelling():
    task, example = jigsaw_1x3(MajorityVote())
    group = tags("3, 1, 2", "3 1 2", "312", "2, 1, 3", "2, 1, 3")
    [rewards] = task.verify_group([example], [group])  # (3, 1, 2) three times, (2, 1, 3) twice
    assert part(rewards, "agreement") == [1, 1, 1, 0, 0] and part(rewards, "majority") == [0.6] * 5
    assert part(rewards, "label_accuracy") == [1.0] * 5
    # one more 2, 1, 3: three votes each, a tie that abstains
    [rewards] = task.verify_group([example], [group + tags("2, 1, 3")])
    assert part(rewards, "agreement") == [0] * 6 and part(rewards, "abstained") == [1.0] * 6
    assert part(rewards, "majority") == [0.5] * 6


#: One number spelled five ways the verifiers all read as 3: plain, with a leading zero, signed,
#: fullwidth and Arabic-Indic.
THREES = ["3", "03", "+3", "\uff13", "\u0663"]


def counting(self_reward):
    task = ObjectCounting(kinds=["circle"], parse="numbers", answer_format="bare", self_reward=self_reward)
    return task, lambda k: Example([], [3], task.name, {"kinds": ["circle"], "question": k})


def steps(self_reward):
    task = ExpertSteps(answer_format="bare", self_reward=self_reward)
    return task, lambda k: Example([], 3, task.name, {"pieces": 4, "step": 1, "question": k})


@pytest.mark.parametrize("numeric", [counting, steps], ids=["object_counting", "expert_steps"])
def test_spellings_of_one_number_are_one_ballot(numeric):
    task, example = numeric(MajorityVote())
    truths = [task.verify(example(0), three).parts for three in THREES]
    assert all(t == truths[0] for t in truths) and truths[0]["exact"] == 1.0  # each is read as 3
    [rewards] = task.verify_group([example(0)], [THREES])
    assert part(rewards, "agreement") == [1] * 5 and part(rewards, "majority") == [1.0] * 5


@pytest.mark.parametrize("numeric", [counting, steps], ids=["object_counting", "expert_steps"])
def test_a_constant_number_cannot_dodge_max_label_share_by_its_spelling(numeric):
    task, example = numeric(MajorityVote(max_label_share=0.5))
    groups = [[three, three, "2"] for three in THREES]  # each elects 3, spelled its own way
    rewards = task.verify_group([example(k) for k in range(5)], groups)
    assert [part(r, "abstained")[0] for r in rewards] == [1.0] * 5
    assert {r.parts["agreement"] for group in rewards for r in group} == {0.0}


def test_without_a_self_reward_verify_group_is_verify():
    task = MultipleChoice(shuffle_choices=False)
    example = question(task)
    [rewards] = task.verify_group([example], [tags("B", "A")])
    assert rewards == [task.verify(example, c) for c in tags("B", "A")]


def test_co_reward_makes_a_question_and_its_rewrite_from_the_same_draws():
    task = MultipleChoice(self_reward=CoReward(rewrite="item"))  # options shuffled by the example's rng
    item = Question("Which animal barks?", ANIMALS, "dog", rewrite="Name the animal that says woof.")
    original, rewrite = task.make_examples(item, random.Random(3))
    assert (original.meta[ROLE_KEY], rewrite.meta[ROLE_KEY]) == ("question", "rewrite")
    assert original.meta["choices"] == rewrite.meta["choices"] and original.answer == rewrite.answer
    assert "barks" in original.prompt_text and "woof" in rewrite.prompt_text and "barks" not in rewrite.prompt_text
    assert [e.prompt_text for e in task.make_examples(item, random.Random(3))] == [
        original.prompt_text,
        rewrite.prompt_text,
    ]
    orders = [[e.meta["choices"] for e in task.make_examples(item, random.Random(seed))] for seed in range(8)]
    assert all(a == b for a, b in orders) and len({tuple(a) for a, _ in orders}) > 1  # same draws, each seed


def test_co_reward_pays_each_question_by_the_other_questions_majority():
    task = mcq(CoReward(rewrite="item"))
    item = Question("Which animal barks?", ANIMALS, "dog", rewrite="Name the animal that says woof.")
    pair = task.make_examples(item, random.Random(0))
    # the question votes A, A, B (A 2/3); the rewrite votes B, B, - (B 2/3)
    asked, rewritten = task.verify_group(pair, [tags("A", "A", "B"), tags("B", "B", None)])
    assert part(asked, "agreement") == [0, 0, 1]  # against the rewrite's B
    assert part(rewritten, "agreement") == [0, 0, 0]  # against the question's A
    assert totals(asked) == [0.5, 0.5, 1.5] and totals(rewritten) == [0.5, 0.5, 0.0]
    assert part(asked, "label_accuracy")[0] == 1.0 and part(rewritten, "label_accuracy")[0] == 0.0
    assert part(asked, "majority")[0] == part(rewritten, "majority")[0] == pytest.approx(2 / 3)


def test_co_reward_can_abstain_on_an_answer_that_wins_most_questions():
    item = Question("Which animal barks?", ANIMALS, "dog", rewrite="Name the animal that says woof.")
    task = mcq(CoReward(rewrite="item", max_label_share=0.5))
    pairs = [e for seed in range(2) for e in task.make_examples(item, random.Random(seed))]
    # both questions and both rewrites elect A: 4 of 4 groups > 0.5 x 4, so all abstain
    rewards = task.verify_group(pairs, [tags("A", "A", "B")] * 4)
    assert {part(r, "abstained")[0] for r in rewards} == {1.0} and {r.total for g in rewards for r in g} == {0.5}
    rewards = task.verify_group(pairs, [tags("A", "A", "B")] * 2 + [tags("B", "B", "A")] * 2)
    assert [part(r, "abstained")[0] for r in rewards] == [0.0] * 4  # A twice, B twice: no more than half
    assert part(rewards[0], "agreement") == [1, 1, 0] and part(rewards[2], "agreement") == [1, 1, 0]


def test_co_reward_refuses_a_batch_that_is_not_in_pairs():
    task = mcq(CoReward(rewrite="item"))
    with pytest.raises(ValueError, match="followed by its rewrite"):
        task.verify_group([question(task)], [tags("A", "B")])


def test_an_item_without_a_rewrite_is_skipped():
    from tasks import SkipItem

    task = mcq(CoReward(rewrite="item"))
    with pytest.raises(SkipItem, match="no rewrite"):
        task.make_examples(Question("Which animal barks?", ANIMALS, "dog"), random.Random(0))


def test_a_photometric_rewrite_keeps_the_answer_and_changes_the_pixels():
    task = Rotation(labels="letters", self_reward=CoReward(strength=0.3))
    original, rewrite = task.make_examples(make_item("image"), random.Random(5))
    assert (original.answer, original.meta | {ROLE_KEY: "rewrite"}) == (rewrite.answer, rewrite.meta)
    pixels = [np.asarray(e.messages[0]["content"][0]["image"], np.int16) for e in (original, rewrite)]
    assert pixels[0].shape == pixels[1].shape and np.abs(pixels[0] - pixels[1]).mean() > 2
    again = task.make_examples(make_item("image"), random.Random(5))[1]
    assert np.array_equal(np.asarray(again.messages[0]["content"][0]["image"]), pixels[1])


def click(*points):
    return ["no idea" if p is None else f"({p[0]}, {p[1]})" for p in points]


def gui_example(task):
    return Example([], [40, 40], task.name, {"box": [30, 30, 50, 50], "text": "Send", "screen": [100, 80]})


def test_region_consistency_pays_the_mean_vote_of_a_region_over_the_peak():
    task = GUIGrounding(answer_format="bare", self_reward=RegionConsistency(point_size=1))
    # points become 2 x 2 cells: (10, 10) -> x, y in 9..10 (twice); (11, 11) -> 10..11. Votes: 2 on
    # three cells, 3 on (10, 10), 1 on the other three of the last square; peak 3.
    [rewards] = task.verify_group([gui_example(task)], [click((10, 10), (10, 10), (11, 11), None)])
    assert part(rewards, "agreement") == [pytest.approx(9 / 12), pytest.approx(9 / 12), 0.5, 0.0]
    assert part(rewards, "consensus") == [0.75] * 4 and part(rewards, "accuracy") == [0.0] * 4
    [inside] = task.verify_group([gui_example(task)], [click((40, 40), (40, 40))])
    assert part(inside, "agreement") == [1.0, 1.0] and part(inside, "accuracy") == [1.0, 1.0]


def test_region_consistency_abstains_without_overlap_and_ignores_huge_boxes():
    task = GUIGrounding(answer_format="bare", self_reward=RegionConsistency(point_size=1, min_votes=2))
    [apart] = task.verify_group([gui_example(task)], [click((10, 10), (60, 60))])
    assert part(apart, "agreement") == [0.0, 0.0] and part(apart, "abstained") == [1.0, 1.0]
    boxes = ReferringGrounding(coords="normalized", answer_format="bare", self_reward=RegionConsistency(max_area=0.5))
    example = Example([], [0, 0, 100, 100], boxes.name, {"bounds": [1000, 1000], "box": [0, 0, 10, 10]})
    # the whole image (area 1 > 0.5) neither votes nor earns; the two small boxes overlap on half of
    # each
    [rewards] = boxes.verify_group([example], [["[0, 0, 1000, 1000]", "[0, 0, 100, 100]", "[50, 0, 150, 100]"]])
    assert part(rewards, "agreement") == [0.0, 0.75, 0.75] and part(rewards, "iou") == [0.01, 1.0, pytest.approx(1 / 3)]


def test_region_consistency_needs_a_grounding_task():
    with pytest.raises(ValueError, match="region"):
        MultipleChoice(self_reward=RegionConsistency())
