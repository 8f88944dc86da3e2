"""BriefEvent: the shown frames hide the flash's colour and a seek shows it; the verifier's table of
transcripts; the control arm asks the same examples without the tool."""

import random

import numpy as np
import pytest

from tasks import BriefEvent, SkipItem, Video
from tasks.tools.base import read_turn, replay, run_call, transcript, turns_of
from tasks.tools.frame_seek import FULL_VIDEO
from tests.helpers import make_item


def made(seed=0, **kwargs):
    task = BriefEvent(**{"format_weight": 0.5, **kwargs})
    return task, task.make_example(make_item("video"), random.Random(seed))


def shown(example):
    return example.messages[0]["content"][0]["video"]


def test_the_flash_falls_between_shown_frames_and_their_video_is_the_same_for_every_colour():
    for seed in range(10):
        task, example = made(seed)
        start, end = example.meta["event"]
        assert end - start == 2 and all(frame % 4 for frame in range(start, end))
        place = (3, 5, 12)
        videos = [task.render(make_item("video").frames, start, place, c) for c in ("red", "blue")]
        assert np.array_equal(videos[0][::4], videos[1][::4])
        assert not np.array_equal(videos[0][start], videos[1][start])
    assert shown(example).shape == (4, 48, 64, 3) and example.messages[0]["content"][0]["fps"] == 1.0


def test_a_seek_at_the_flash_shows_its_colour():
    task, example = made()
    seek = read_turn(task.expert_calls(example)[0], task.toolbox.tools).call
    video, text = run_call(seek, task.toolbox.tools, example)
    start, end = example.meta["event"]
    full = example.tool_media[FULL_VIDEO].frames
    index = task.seek.window(seek.args[0], 16, 4.0)
    assert np.array_equal(video["video"], full[index]) and video["fps"] == 4.0
    assert set(range(start, end)) <= set(index.tolist())


def answer(task, example, right=True):
    letter = task.answer_text(example)
    return f"<answer>{letter if right else 'ABCD'.replace(letter, '')[0]}</answer>"


def test_the_verifier_table():
    task, example = made()
    start = example.meta["event"][0]  # frames 6 and 7 at 4 fps: 1.5 s to 2 s
    assert example.meta["event"] == [6, 8] and example.meta["seek"] == 1.5
    right, wrong = answer(task, example), answer(task, example, right=False)
    table = [
        (transcript(["<seek>1.5</seek>", right]), 1.0, 1.0, 2.0),
        (transcript(["<seek>1.75</seek>", wrong]), 0.0, 1.0, 1.0),  # frames 5-8
        (transcript(["<seek>3.5</seek>", right]), 1.0, 0.0, 1.5),  # frames 12-15 miss it
        (right, 1.0, 0.0, 1.5),
        (transcript(["<seek>4.5</seek>", right]), 0.0, 0.0, 0.0),  # past the end: cannot run
        (transcript(["<seek>-1</seek>", right]), 0.0, 0.0, 0.0),
        ("<seek>1.5</seek>", 0.0, 0.0, 0.0),  # the tool in the last turn
        (transcript(["<seek>1.5</seek>", "<seek>1.5</seek>", right]), 0.0, 0.0, 0.0),
    ]
    for completion, accuracy, grounding, total in table:
        reward = task.verify(example, completion)
        assert (reward.parts["accuracy"], reward.parts["grounding"]) == (accuracy, grounding), completion
        assert reward.total == pytest.approx(total), completion
    assert start / 4.0 == 1.5


def test_only_the_first_seek_is_grounded():
    task, example = made(max_turns=3)
    right = answer(task, example)
    assert task.verify(example, transcript(["<seek>1.5</seek>", "<seek>3.5</seek>", right])).total == 2.0
    assert task.verify(example, transcript(["<seek>3.5</seek>", "<seek>1.5</seek>", right])).total == 1.5


def test_the_demonstration_replays_to_the_flash():
    task, example = made()
    demonstration = task.demonstration(example)
    assert turns_of(demonstration)[0] == "<seek>1.50</seek>"
    assert task.verify(example, demonstration).total == task.max_reward == 2.0
    messages = replay(example.messages, turns_of(demonstration), task.toolbox.tools, example)
    frames = messages[2]["content"][0]["video"]
    colour = {"red": (255, 0, 0), "green": (0, 200, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0)}[example.answer]
    assert (frames == colour).all(axis=-1).any()
    assert not (shown(example) == colour).all(axis=-1).any()


def test_the_control_arm_asks_the_same_examples_in_one_turn():
    for seed in range(5):
        (_, with_tool), (control, without) = made(seed), made(seed, tools=False)
        assert with_tool.answer == without.answer and with_tool.meta == without.meta
        assert np.array_equal(shown(with_tool), shown(without))
        assert "<seek>" not in without.messages[0]["content"][-1]["text"]
    assert control.max_reward == 1.5 and control.verify(without, answer(control, without)).total == 1.5


def test_a_video_shorter_than_two_strides_is_skipped_and_options_are_checked():
    task = BriefEvent(stride=8)
    with pytest.raises(SkipItem, match="needs 16"):
        task.make_example(Video(make_item("video").frames[:15], 4.0), random.Random(0))
    with pytest.raises(ValueError, match="length"):
        BriefEvent(stride=2, length=2)
    with pytest.raises(ValueError, match="frames"):
        BriefEvent(seek_frames=3)
