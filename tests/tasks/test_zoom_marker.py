"""ZoomMarker: the shown view hides the pattern and a crop shows it; the verifier's table of
transcripts; the expert transcript; the control arm asks the same examples without the tool."""

import itertools
import random

import numpy as np
import pytest

from tasks import ZoomMarker
from tasks.image.zoom_marker import PATTERNS, pattern_mask
from tasks.tools.base import TURN_BREAK, read_turn, replay, run_call, transcript, turns_of
from tasks.tools.crop_zoom import FULL_IMAGE
from tests.helpers import make_item


def made(seed=0, **kwargs):
    task = ZoomMarker(**{"format_weight": 0.5, **kwargs})
    return task, task.make_example(make_item("image"), random.Random(seed))


def view(task, example):
    return example.messages[0]["content"][0]["image"]


def crop_of(task, example, box):
    action = read_turn("<crop>{}, {}, {}, {}</crop>".format(*box), task.toolbox.tools)
    return np.asarray(run_call(action.call, task.toolbox.tools, example)[0]["image"], dtype=float)


@pytest.mark.parametrize("first, second", itertools.combinations(PATTERNS, 2))
def test_the_shown_view_cannot_tell_the_patterns_apart_and_the_crop_can(first, second):
    task, example = made(patterns=list(PATTERNS))
    box, item = example.meta["box"], make_item("image")
    fulls = [task.render(item, box, ((0, 0, 0), (255, 255, 255)), p) for p in (first, second)]
    shrunk = [task.shrink(full) for full in fulls]
    assert shrunk[0].tobytes() == shrunk[1].tobytes()
    crops = []
    for full in fulls:
        example.tool_media[FULL_IMAGE] = full
        crops.append(crop_of(task, example, box))
    assert np.abs(crops[0] - crops[1]).mean() > 40  # about half the inner pixels swap black and white


def test_the_marker_is_where_the_view_shows_its_border():
    task, example = made()
    x1, y1, x2, y2 = example.meta["box"]
    pixels = np.asarray(view(task, example))
    assert (pixels[y1, x1:x2] == (255, 0, 0)).all() and (pixels[y1:y2, x1] == (255, 0, 0)).all()
    assert view(task, example).size == (224, 224) and example.tool_media[FULL_IMAGE].size == (896, 896)


def test_each_pattern_is_half_one_colour_in_every_block():
    for pattern in PATTERNS:
        mask = pattern_mask(pattern, 8)
        blocks = mask.reshape(2, 4, 2, 4).sum(axis=(1, 3))  # [2, 2] counts per 4x4 block
        assert (blocks == 8).all(), pattern
    assert pattern_mask("horizontal", 2).tolist() == [[True, True], [False, False]]


def answer_of(task, example, right=True):
    letter = task.answer_text(example)
    return f"<answer>{letter if right else 'AB'.replace(letter, '')}</answer>"


def crop_turn(box):
    return "<crop>{}, {}, {}, {}</crop>".format(*box)


def test_the_verifier_table():
    task, example = made()
    box = example.meta["box"]  # 10 x 10 shown pixels
    right, wrong = answer_of(task, example), answer_of(task, example, right=False)
    x1, y1 = box[:2]
    half = [x1 + 5, y1, x1 + 15, y1 + 10]  # overlaps half the marker: IoU 50 / 150
    table = [
        (transcript([crop_turn(box), right]), 1.0, 1.0, 2.0),  # accuracy + 0.5 grounding + 0.5 format
        (transcript([crop_turn(box), wrong]), 0.0, 1.0, 1.0),
        (right, 1.0, 0.0, 1.5),  # answered without the tool
        (transcript([crop_turn(half), right]), 1.0, 1 / 3, 1.5 + 0.5 / 3),
        (transcript(["<crop>1, 2, 3</crop>", right]), 0.0, 0.0, 0.0),  # malformed call
        (transcript([f"Zooming: {crop_turn(box)}", right]), 0.0, 0.0, 0.0),  # stray text
        (crop_turn(box), 0.0, 0.0, 0.0),  # the tool in the last turn
        (transcript([crop_turn(box), crop_turn(box)]), 0.0, 0.0, 0.0),
        (transcript([crop_turn(box), crop_turn(box), right]), 0.0, 0.0, 0.0),  # past max_turns
        (transcript([crop_turn([300, 300, 310, 310]), right]), 0.0, 0.0, 0.0),  # cannot run
        (transcript(["<answer>A</answer>", right]), 0.0, 0.0, 0.0),  # an answer is the last turn
    ]
    for completion, accuracy, grounding, total in table:
        reward = task.verify(example, completion)
        assert reward.parts["accuracy"] == accuracy, completion
        assert reward.parts["grounding"] == pytest.approx(grounding), completion
        assert reward.total == pytest.approx(total), completion
    assert task.max_reward == 2.0


def test_more_turns_allow_more_crops_and_the_first_is_grounded():
    task, example = made(max_turns=3)
    box, right = example.meta["box"], answer_of(task, example)
    assert task.verify(example, transcript([crop_turn(box), crop_turn([0, 0, 224, 224]), right])).total == 2.0
    assert task.verify(example, transcript([crop_turn([0, 0, 224, 224]), crop_turn(box), right])).total < 1.6
    assert "zoom in up to 2 times" in example.messages[0]["content"][-1]["text"]


@pytest.mark.parametrize("think", [False, True])
def test_the_demonstration_is_the_expert_transcript_and_replays(think):
    task, example = made(think=think)
    demonstration = task.demonstration(example)
    call, answer = turns_of(demonstration)
    assert call == crop_turn(example.meta["box"]) and demonstration == task.render_answer(example)
    assert task.verify(example, demonstration).total == task.max_reward == 2.0
    messages = replay(example.messages, turns_of(demonstration), task.toolbox.tools, example)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[2]["content"][0]["image"].size == (224, 224)


def test_the_control_arm_asks_the_same_examples_in_one_turn():
    for seed in range(5):
        (tool, with_tool), (control, without) = made(seed), made(seed, tools=False)
        assert with_tool.answer == without.answer and with_tool.meta == without.meta
        assert view(tool, with_tool).tobytes() == view(control, without).tobytes()
        assert with_tool.tool_media[FULL_IMAGE].tobytes() == without.tool_media[FULL_IMAGE].tobytes()
        assert "<crop>" in with_tool.messages[0]["content"][-1]["text"]
        assert "<crop>" not in without.messages[0]["content"][-1]["text"]
    assert control.toolbox is None and control.max_reward == 1.5
    right = answer_of(control, without)
    assert control.render_answer(without) == right and control.verify(without, right).total == 1.5
    assert control.verify(without, transcript([crop_turn(without.meta["box"]), right])).total == 0.0


def test_options_are_checked():
    with pytest.raises(ValueError, match="zoom"):
        ZoomMarker(zoom=3)
    with pytest.raises(ValueError, match="multiple of 4"):
        ZoomMarker(patterns=["horizontal", "diagonal"], zoom=2)
    with pytest.raises(ValueError, match="patterns"):
        ZoomMarker(patterns=["horizontal", "spots"])
    with pytest.raises(ValueError, match="grounding_weight"):
        ZoomMarker(grounding_weight=-1)
    assert TURN_BREAK not in ZoomMarker(tools=False).render_answer(made()[1])


def test_with_a_grid_the_marker_sits_in_one_cell_and_the_expert_crops_that_cell():
    task = ZoomMarker(view_size=56, grid=2, marker=4, answer_format="bare")
    for seed in range(20):
        example = task.make_example(make_item("image", seed), random.Random(seed))
        x1, y1, x2, y2 = example.meta["cell"]
        assert x2 - x1 == 28 and x1 % 28 == 0 and y1 % 28 == 0
        bx1, by1, bx2, by2 = example.meta["box"]
        assert x1 < bx1 and bx2 < x2 and y1 < by1 and by2 < y2  # inside, off the cell's edges
        assert task.demonstration(example).startswith(f"<crop>{x1}, {y1}, {x2}, {y2}</crop>")
        assert task.verify(example, task.demonstration(example)).parts["grounding"] == 1.0
    half = f"<crop>{bx1}, {by1}, {(bx1 + bx2) // 2}, {by2}</crop>" + TURN_BREAK + "A"
    assert task.verify(example, half).parts["grounding"] == pytest.approx(((bx1 + bx2) // 2 - bx1) / (bx2 - bx1))
