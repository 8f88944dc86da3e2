"""GUIZoomLabel: the framed element's box in shown pixels, the crop that reads it, the verifier's
table and the control arm."""

import random

import numpy as np
import pytest

from tasks import GUIZoomLabel, Node, SkipItem
from tasks.tools.base import replay, transcript, turns_of
from tasks.tools.crop_zoom import FULL_IMAGE
from tests.helpers import sample_transition


def made(**kwargs):
    task = GUIZoomLabel(**{"format_weight": 0.5, **kwargs})
    for seed in range(50):
        example = task.make_example(sample_transition(), random.Random(seed))
        if example.answer == "Send":  # the button at (80, 170, 110, 190) of the 120 x 200 screen
            return task, example
    raise AssertionError("Send never drawn")


def test_the_framed_box_in_shown_pixels_by_hand():
    task, example = made()
    # framed: 4 px around the button, (76, 166, 114, 194); 4x smaller, widened to whole pixels:
    # 19, 41.5 -> 41, 28.5 -> 29, 48.5 -> 49
    assert example.meta["shown_size"] == [30, 50] and example.meta["box"] == [19, 41, 29, 49]
    assert set(example.meta["options"]) == {"Inbox", "Alice", "Bob", "Send"}
    full = np.asarray(example.tool_media[FULL_IMAGE])
    assert (full[166, 76:114] == (255, 0, 0)).all() and (full[170:190, 80:110] != (255, 0, 0)).any()


def test_the_demonstration_crops_the_framed_element_and_earns_the_top_reward():
    task, example = made(crop_pixels=40 * 32)
    demonstration = task.demonstration(example)
    assert turns_of(demonstration)[0] == "<crop>19, 41, 29, 49</crop>"
    assert task.verify(example, demonstration).total == task.max_reward == 2.0
    crop = replay(example.messages, turns_of(demonstration), task.toolbox.tools, example)[2]["content"][0]["image"]
    # the shown box times 4: the full-resolution region itself at 40 x 32 pixels
    assert crop.tobytes() == example.tool_media[FULL_IMAGE].crop((76, 164, 116, 196)).tobytes()


def test_the_verifier_table():
    task, example = made()
    letter = task.answer_text(example)
    right = f"<answer>{letter}</answer>"
    wrong = f"<answer>{'ABCD'.replace(letter, '')[0]}</answer>"
    table = [
        (transcript(["<crop>19, 41, 29, 49</crop>", right]), 2.0),
        (transcript(["<crop>19, 41, 29, 49</crop>", wrong]), 1.0),
        (transcript(["<crop>0, 0, 30, 50</crop>", right]), 1.5 + 0.5 * 80 / 1500),  # the whole screen
        (right, 1.5),
        (transcript(["<crop>40, 0, 50, 10</crop>", right]), 0.0),  # off the screen
        ("<crop>19, 41, 29, 49</crop>", 0.0),
    ]
    for completion, total in table:
        assert task.verify(example, completion).total == pytest.approx(total), completion


def test_the_control_arm_asks_the_same_examples_in_one_turn():
    (_, with_tool), (control, without) = made(), made(tools=False)
    assert with_tool.meta == without.meta and with_tool.answer == without.answer
    views = [example.messages[0]["content"][0]["image"].tobytes() for example in (with_tool, without)]
    assert views[0] == views[1]
    assert "<crop>" not in without.messages[0]["content"][-1]["text"] and control.max_reward == 1.5


def test_a_screen_with_one_label_is_skipped():
    transition = sample_transition()
    transition.nodes = [Node((0, 0, 120, 200), "", "screen"), Node((80, 170, 110, 190), "Send", "button")]
    with pytest.raises(SkipItem, match="fewer than two labels"):
        GUIZoomLabel().make_example(transition, random.Random(0))
