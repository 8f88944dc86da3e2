"""GUIInverseDynamics rewards on hand-made cases: box edges, nested nodes, a missing tree, strict
JSON."""

import json
import random

import pytest

from tasks import GUIInverseDynamics, SkipItem
from tests.helpers import sample_transition

SEND = {"action": "click", "x": 95, "y": 180}  # inside "Send" (80, 170, 110, 190), inside the bar below it


def reward(completion, action=SEND, nodes=True, **kwargs):
    task = GUIInverseDynamics(scales=[1.0], answer_format="bare", format_weight=1.0, **kwargs)
    example = task.make_example(sample_transition(action=action, nodes=nodes), random.Random(0))
    return task.verify(example, completion if isinstance(completion, str) else json.dumps(completion))


def click(x, y, kind="click"):
    return {"action": kind, "x": x, "y": y}


@pytest.mark.parametrize("x, y", [(80, 170), (110, 190), (80, 190), (95, 180), (110.0, 170.0)])
def test_a_click_on_the_edge_or_inside_the_smallest_node_is_right(x, y):
    assert reward(click(x, y)).parts == {"accuracy": 1.0, "action_type": 1.0, "format": 1.0}


@pytest.mark.parametrize("x, y", [(79, 180), (111, 180), (95, 169), (95, 191), (20, 180), (60, 100)])
def test_a_click_outside_the_smallest_node_misses_even_inside_its_parent(x, y):
    # (20, 180) is inside the bottom bar holding "Send", (60, 100) inside the list: containers do
    # not count
    parts = reward(click(x, y)).parts
    assert parts == {"accuracy": 0.0, "action_type": 1.0, "format": 1.0}


def test_without_a_tree_a_click_counts_within_the_radius():
    # radius 0.05 x the shorter side (120) = 6 px around (95, 180)
    assert reward(click(101, 180), nodes=False).parts["accuracy"] == 1.0
    assert reward(click(99, 184), nodes=False).parts["accuracy"] == 1.0  # 4.47 px away
    assert reward(click(102, 180), nodes=False).parts["accuracy"] == 0.0
    assert reward(click(110, 190), nodes=False).parts["accuracy"] == 0.0  # the box edge no longer helps
    assert reward(click(102, 180), nodes=False, click_radius=0.1).parts["accuracy"] == 1.0


def test_a_click_no_node_contains_falls_back_to_the_radius():
    task = GUIInverseDynamics(scales=[1.0])
    item = sample_transition(action=click(95, 180))
    item.nodes = [node for node in item.nodes if node.kind in ("app_bar", "row")]  # none holds (95, 180)
    example = task.make_example(item, random.Random(0))
    assert example.meta["box"] is None and example.meta["radius"] == pytest.approx(6.0)
    assert task.verify(example, '<answer>{"action": "click", "x": 99, "y": 180}</answer>').parts["accuracy"] == 1.0
    assert task.verify(example, '<answer>{"action": "click", "x": 95, "y": 187}</answer>').parts["accuracy"] == 0.0


@pytest.mark.parametrize(
    "completion",
    [
        '{"action": "click", "x": 95, "y": 180',  # truncated
        "{'action': 'click', 'x': 95, 'y': 180}",  # a Python dict, not JSON
        '```json\n{"action": "click", "x": 95, "y": 180}\n```',  # a code fence around it
        '{"action": "click", "x": 95, "y": 180} {"action": "wait"}',  # two objects
        '[{"action": "click", "x": 95, "y": 180}]',  # a list
        '{"action": "click", "x": NaN, "y": 180}',
        '{"action": "click", "x": "95", "y": 180}',  # a string coordinate
        '{"action": "click", "x": true, "y": 180}',
        '{"action": "click", "x": 95, "x": 96, "y": 180}',  # duplicate key
        '{"action": "click", "x": 95}',  # missing y
        '{"action": "tap", "x": 95, "y": 180}',  # unknown type
        "__import__('os').system('true')",
        '{"action": "click", "x": 1' + "0" * 5000 + ', "y": 180}',
        "[" * 100_000,
    ],
)
def test_malformed_json_earns_nothing(completion):
    assert reward(completion).parts == {"accuracy": 0.0, "action_type": 0.0, "format": 0.0}


def test_extra_keys_make_the_answer_invalid():
    assert reward(click(95, 180) | {"reason": "send it"}).parts["format"] == 0.0
    assert reward({"action_type": "click", "x": 95, "y": 180}).parts["format"] == 0.0  # AndroidControl's key


@pytest.mark.parametrize(
    "x, y, valid", [(-1, 180, False), (121, 180, False), (95, 200.5, False), (120, 200, True), (0, 0, True)]
)
def test_coordinates_outside_the_screen_are_invalid(x, y, valid):
    parts = reward(click(x, y)).parts
    assert parts["format"] == float(valid) and parts["accuracy"] == 0.0


def test_the_wrong_action_type_earns_format_only():
    parts = reward(click(95, 180, "long_press")).parts
    assert parts == {"accuracy": 0.0, "action_type": 0.0, "format": 1.0}
    assert reward({"action": "navigate_back"}).parts["action_type"] == 0.0


@pytest.mark.parametrize(
    "typed, right",
    [
        ("hello world", True),
        ("  Hello   WORLD ", True),
        ("Ｈｅｌｌｏ World", True),
        ("hello world!", False),
        ("helloworld", False),
    ],
)
def test_typed_text_is_compared_normalised(typed, right):
    truth = {"action": "type", "text": "Hello  World"}
    assert reward({"action": "type", "text": typed}, action=truth).parts["accuracy"] == float(right)
    assert reward({"action": "type", "text": ""}, action=truth).parts["format"] == 0.0


def test_scroll_needs_the_direction_and_app_the_name():
    truth = {"action": "scroll", "direction": "down"}
    assert reward({"action": "scroll", "direction": "down"}, action=truth).parts["accuracy"] == 1.0
    assert reward({"action": "scroll", "direction": "up"}, action=truth).parts == {
        "accuracy": 0.0,
        "action_type": 1.0,
        "format": 1.0,
    }
    assert reward({"action": "scroll", "direction": "sideways"}, action=truth).parts["format"] == 0.0
    app = {"action": "open_app", "app_name": "Gmail"}  # AndroidControl's field name in the recorded action
    assert reward({"action": "open_app", "app": "gmail"}, action=app).parts["accuracy"] == 1.0


def test_type_credit_pays_for_the_right_type_with_wrong_arguments():
    assert reward(click(10, 10), type_credit=0.25).total == pytest.approx(1.25)


def test_scaled_screenshots_scale_the_click_and_its_box():
    task = GUIInverseDynamics(scales=[0.5])
    example = task.make_example(sample_transition(), random.Random(0))
    assert example.meta["screen"] == [60, 100] and example.meta["box"] == [40, 85, 55, 95]
    assert example.answer == {"action": "click", "x": 48, "y": 90}
    assert "60 x 100 pixels" in example.prompt_text
    sizes = [part["image"].size for part in example.messages[0]["content"] if part["type"] == "image"]
    assert sizes == [(60, 100), (60, 100)]


def test_letter_output_asks_for_the_type():
    task = GUIInverseDynamics(output="letter", action_types=["scroll", "click", "wait"], answer_format="bare")
    example = task.make_example(sample_transition(), random.Random(0))
    assert task.answer_text(example) == "B" and "B) click" in example.prompt_text
    assert task.verify(example, "A").parts == {"accuracy": 0.0, "action_type": 0.0, "format": 1.0}
    with pytest.raises(SkipItem, match="not among"):
        task.make_example(sample_transition(action={"action": "navigate_home"}), random.Random(0))


def test_a_recorded_click_off_the_screen_is_skipped():
    with pytest.raises(SkipItem, match="off the screen"):
        GUIInverseDynamics().make_example(sample_transition(action=click(95, 230)), random.Random(0))
    with pytest.raises(SkipItem, match="unknown action"):
        GUIInverseDynamics().make_example(sample_transition(action={"action": "fly"}), random.Random(0))
