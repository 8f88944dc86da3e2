"""GUIGrounding: the target is one labelled element, the reward is point-in-box."""

import random

import pytest

from tasks import GUIGrounding, Node, SkipItem
from tests.helpers import sample_transition


def example_for(text, task=None):
    task = task or GUIGrounding(answer_format="bare")
    for seed in range(100):
        example = task.make_example(sample_transition(), random.Random(seed))
        if example.meta["text"] == text:
            return task, example
    raise AssertionError(f"{text} never drawn")


def test_targets_are_labelled_leaves():
    task = GUIGrounding()
    texts = {task.make_example(sample_transition(), random.Random(s)).meta["text"] for s in range(60)}
    assert texts == {"Inbox", "Alice", "Bob", "Send"}  # the screen, list and bar have no text
    assert [n.text for n in GUIGrounding(kinds=["button"]).targets(sample_transition().nodes, (120, 200))] == ["Send"]


def test_elements_off_the_screenshot_are_cut_to_it_or_never_asked_for():
    """A tree may list elements partly or wholly off the screenshot (scrolled away, a stale dump):
    the target is the part on the screen, so the right answer always lies on it and earns the full
    reward."""
    transition = sample_transition()
    transition.nodes = [Node((100, 150, 400, 190), "Half off", "button"), Node((130, 0, 300, 40), "Gone", "button")]
    task = GUIGrounding(answer_format="bare")
    examples = [task.make_example(transition, random.Random(seed)) for seed in range(10)]
    assert {e.meta["text"] for e in examples} == {"Half off"}
    assert examples[0].meta["box"] == [100, 150, 120, 190] and examples[0].answer == [110, 170]
    assert task.verify(examples[0], task.render_answer(examples[0])).total == task.max_reward
    transition.nodes = transition.nodes[1:]
    with pytest.raises(SkipItem, match="no labelled element on the screenshot"):
        task.make_example(transition, random.Random(0))


@pytest.mark.parametrize(
    "answer, accuracy",
    [
        ("(80, 170)", 1.0),
        ("110,190", 1.0),
        ("(95.5, 180.25)", 1.0),
        ("(79, 180)", 0.0),
        ("(95, 191)", 0.0),
        ("(60, 30)", 0.0),
    ],
)
def test_point_in_box_with_edges(answer, accuracy):
    task, example = example_for("Send")
    parts = task.verify(example, answer).parts
    assert parts == {"accuracy": accuracy, "format": 1.0}


@pytest.mark.parametrize("answer", ["(95 180)", "95, 180, 3", "(-5, 180)", "(121, 180)", "x=95, y=180", "(95, 1e3)"])
def test_malformed_or_off_screen_points_are_invalid(answer):
    task, example = example_for("Send")
    assert task.verify(example, answer).parts == {"accuracy": 0.0, "format": 0.0}


def test_the_question_names_the_element_and_the_answer_is_its_centre():
    task, example = example_for("Bob")
    assert '"Bob"' in example.prompt_text and "120 x 200" in example.prompt_text
    assert task.answer_text(example) == "(60, 100)"


def test_a_screen_without_a_tree_is_skipped():
    with pytest.raises(SkipItem):
        GUIGrounding().make_example(sample_transition(nodes=False), random.Random(0))
