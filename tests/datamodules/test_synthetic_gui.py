"""SyntheticGUI and SyntheticGridWorld: deterministic, every action changes the screen, and the tree
matches what is drawn (so a click on an element changes that element's pixels)."""

import random

import numpy as np
import pytest

from datamodules import SyntheticGridWorld, SyntheticGUI
from datamodules.sources.synthetic_gui import State
from tasks import GUIInverseDynamics
from tasks.gui.common import ACTION_FIELDS, check_action, smallest_node

SOURCE = SyntheticGUI(size=400, width=112, height=196, seed=3)
ITEMS = [SOURCE[i] for i in range(120)]


def pixels(image):
    return np.asarray(image).astype(int)


def test_items_are_a_function_of_seed_and_index():
    again = SyntheticGUI(size=400, width=112, height=196, seed=3)[7]
    assert np.array_equal(pixels(again.before), pixels(ITEMS[7].before)) and again.action == ITEMS[7].action
    assert SyntheticGUI(size=400, width=112, height=196, seed=4)[7].action != again.action or not np.array_equal(
        pixels(SyntheticGUI(size=400, width=112, height=196, seed=4)[7].before), pixels(again.before)
    )


def test_every_action_type_occurs_and_changes_the_screen():
    assert {item.action["action"] for item in ITEMS} == set(ACTION_FIELDS)
    for item in ITEMS:
        assert check_action(item.action) == item.action
        assert item.before.size == item.after.size == (112, 196)
        assert not np.array_equal(pixels(item.before), pixels(item.after)), item.action


def test_a_click_lands_on_an_element_whose_pixels_change():
    for item in ITEMS:
        if item.action["action"] not in ("click", "long_press"):
            continue
        node = smallest_node(item.nodes, item.action["x"], item.action["y"])
        assert node.kind in ("icon", "tab", "row", "button"), node
        left, top, right, bottom = node.bounds
        region = (slice(top, bottom), slice(left, right))
        assert not np.array_equal(pixels(item.before)[region], pixels(item.after)[region]), (item.action, node)


def test_the_tree_is_what_is_drawn():
    screen = State(app=2, tab=1, offset=2, text="tea", selected=3)
    image = pixels(SOURCE.render(screen))
    nodes = SOURCE.nodes(screen)
    outlined = [n for n in nodes if n.kind in ("row", "text_field")]
    assert len(outlined) == 5
    for node in outlined:  # an outlined element has its outline exactly on its bounds
        left, top, right, bottom = node.bounds
        assert tuple(image[top, left]) == tuple(image[bottom - 1, right - 1]) == (150, 150, 150), node
    tabs = [n for n in nodes if n.kind == "tab"]
    fills = [tuple(image[(n.bounds[1] + n.bounds[3]) // 2, n.bounds[0] + 2]) for n in tabs]
    assert fills[1] != fills[0] == fills[2]  # the selected tab stands out
    rows = [n for n in nodes if n.kind == "row"]
    assert [r.text.split()[-1] for r in rows] == ["3", "4", "5", "6"]  # offset 2: items 3 to 6 are visible
    assert tuple(image[rows[1].bounds[3] - 3, rows[1].bounds[2] - 3]) == (250, 225, 120)  # item 4 selected


def test_perfect_and_wrong_clicks_on_synthetic_screens():
    task = GUIInverseDynamics(scales=[1.0], answer_format="bare")
    for i, item in enumerate(ITEMS):
        example = task.make_example(item, random.Random(i))
        assert task.verify(example, task.render_answer(example)).total == 1.0
        if item.action["action"] == "click":
            other = next(
                n
                for n in item.nodes
                if n.kind in ("icon", "tab", "row", "button", "panel") and n.bounds != tuple(example.meta["box"])
            )
            x, y = (other.bounds[0] + other.bounds[2]) // 2, (other.bounds[1] + other.bounds[3]) // 2
            miss = f'{{"action": "click", "x": {x}, "y": {y}}}'
            assert task.verify(example, miss).parts["accuracy"] == 0.0


def test_actions_can_be_restricted():
    source = SyntheticGUI(size=50, actions=["scroll", "wait"])
    assert {source[i].action["action"] for i in range(50)} == {"scroll", "wait"}
    with pytest.raises(ValueError):
        SyntheticGUI(actions=["fly"])


def test_grid_world_moves_are_visible_and_allowed():
    world = SyntheticGridWorld(size=200, grid=4, image_size=56, seed=1)
    seen = set()
    for i in range(200):
        pair = world[i]
        seen.add(pair.action)
        before, after = (np.all(pixels(f) == (230, 40, 40), -1) for f in (pair.before, pair.after))
        assert before.sum() == after.sum() > 0  # one agent, inside the board, in both frames
        (y0, x0), (y1, x1) = (np.argwhere(mask).mean(0) for mask in (before, after))
        step = {"up": (0, -14), "down": (0, 14), "left": (-14, 0), "right": (14, 0), "stay": (0, 0)}[pair.action]
        assert (x1 - x0, y1 - y0) == pytest.approx(step), pair.action
    assert seen == {"up", "down", "left", "right", "stay"}
    assert np.array_equal(pixels(world[5].before), pixels(SyntheticGridWorld(size=200, seed=1)[5].before))


def test_k_step_transitions_keep_the_first_action_and_move_on():
    k_step = SyntheticGUI(size=400, width=112, height=196, seed=3, steps=3)
    moved = 0
    for i in range(40):
        item = k_step[i]
        assert item.steps == 3 and item.action == ITEMS[i].action
        assert np.array_equal(pixels(item.before), pixels(ITEMS[i].before))
        moved += not np.array_equal(pixels(item.after), pixels(ITEMS[i].after))
    assert moved > 30  # two more actions usually change the screen again
    task = GUIInverseDynamics(answer_format="tags", format_weight=1.0)
    example = task.make_example(k_step[0], random.Random(0))
    assert "taken 3 GUI actions after the first" in example.prompt_text and example.meta["steps"] == 3
    assert task.verify(example, task.render_answer(example)).total == 2.0
    assert "right after it" in task.make_example(ITEMS[0], random.Random(0)).prompt_text
    with pytest.raises(ValueError, match="steps"):
        SyntheticGUI(steps=0)
