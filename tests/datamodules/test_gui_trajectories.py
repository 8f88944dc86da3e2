"""GUITrajectories and FramePairs read JSONL episodes whose paths stay inside the dataset folder;
unusable rows are skipped, counted and logged once."""

import json
import logging

import numpy as np
import pytest
from PIL import Image

from datamodules import FramePairs, GUITrajectories
from tasks import SkipItem


def shot(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((40, 24, 3), value, np.uint8)).save(path)
    return path


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return str(path)


@pytest.fixture
def episodes(tmp_path):
    root = tmp_path / "data"
    for i in range(3):
        shot(root / "ep1" / f"{i}.png", 40 * i)
    shot(tmp_path / "outside.png", 200)  # exists, but outside the dataset folder
    (root / "ep1" / "broken.png").write_bytes(b"not a png")
    tree = [
        {"bounds": [0, 0, 24, 40], "text": "", "class": "FrameLayout"},
        {
            "bbox_pixels": {"x_min": 2, "y_min": 4, "x_max": 12, "y_max": 10},
            "content_description": "OK",
            "class_name": "Button",
        },
    ]
    rows = [
        {
            "episode_id": 1,
            "screenshots": ["ep1/0.png", "ep1/1.png", "ep1/2.png"],
            "actions": [{"action_type": "click", "x": 5, "y": 6}, {"action_type": "input_text", "text": "hi"}],
            "accessibility_trees": [tree, tree, tree],
        },
        {"episode_id": 2, "screenshots": ["ep1/0.png", "../outside.png"], "actions": [{"action_type": "wait"}]},
        {"episode_id": 3, "screenshots": ["ep1/0.png", "ep1/missing.png"], "actions": [{"action": "wait"}]},
        {"episode_id": 4, "screenshots": ["ep1/0.png", "ep1/1.png"], "actions": [{"action": "teleport"}]},
        {"episode_id": 5, "screenshots": ["ep1/0.png"], "actions": [{"action": "wait"}]},
        "{not json",
        {"episode_id": 6, "screenshots": ["ep1/1.png", "ep1/broken.png"], "actions": [{"action": "navigate_back"}]},
        {"episode_id": 7, "screenshots": [str(tmp_path / "outside.png"), "ep1/1.png"], "actions": [{"action": "wait"}]},
    ]
    return write_jsonl(root / "episodes.jsonl", rows)


def test_reads_steps_and_skips_bad_rows_once(episodes, caplog):
    with caplog.at_level(logging.WARNING):
        source = GUITrajectories(episodes)
    # kept: 2 steps of episode 1 and the broken image of episode 6 (found only when decoded)
    assert len(source) == 3
    # skipped: the escaping path, the missing screenshot, the unknown action, the short episode, the
    # bad line, and the absolute path outside the folder
    assert source.skipped == 6
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "skipped 6" in warnings[0].getMessage()
    first, second = source[0], source[1]
    assert first.action == {"action": "click", "x": 5, "y": 6}  # AndroidControl names normalised
    assert second.action == {"action": "type", "text": "hi"}
    assert [(n.bounds, n.text, n.kind) for n in first.nodes] == [
        ((0, 0, 24, 40), "", "FrameLayout"),
        ((2, 4, 12, 10), "OK", "Button"),
    ]
    assert np.asarray(first.before)[0, 0, 0] == 0 and np.asarray(first.after)[0, 0, 0] == 40
    assert first.screen_size == (24, 40)
    with pytest.raises(SkipItem, match="broken.png"):
        source[2]


def test_an_empty_or_missing_file_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        GUITrajectories(str(tmp_path / "none.jsonl"))
    with pytest.raises(ValueError, match="no usable step"):
        GUITrajectories(write_jsonl(tmp_path / "bad.jsonl", ["{}"]))


def test_a_symlink_out_of_the_folder_is_skipped(tmp_path):
    root = tmp_path / "data"
    shot(root / "a.png", 0)
    (root / "b.png").symlink_to(shot(tmp_path / "secret.png", 9))
    rows = [
        {"screenshots": ["a.png", "b.png"], "actions": [{"action": "wait"}]},
        {"screenshots": ["a.png", "a.png"], "actions": [{"action": "wait"}]},
    ]
    source = GUITrajectories(write_jsonl(root / "e.jsonl", rows))
    assert len(source) == 1 and source.skipped == 1


def test_frame_pairs(tmp_path):
    root = tmp_path / "log"
    for i in range(3):
        shot(root / "run" / f"{i}.png", 50 * i)
    rows = [
        {"frames": ["run/0.png", "run/1.png", "run/2.png"], "actions": ["left", "up"]},
        {"frames": ["run/0.png", "../x.png"], "actions": ["up"]},
        {"frames": ["run/0.png", "run/1.png"], "actions": ["jump"]},
        {"frames": ["run/0.png"], "actions": ["up"]},
    ]
    path = write_jsonl(root / "log.jsonl", rows)
    pairs = FramePairs(path, actions=["up", "down", "left", "right"])
    assert len(pairs) == 2 and pairs.skipped == 3
    assert pairs[1].action == "up" and pairs[1].actions == ("up", "down", "left", "right")
    assert np.asarray(pairs[1].before)[0, 0, 0] == 50 and np.asarray(pairs[1].after)[0, 0, 0] == 100
    found = FramePairs(path)  # the action set read from the file
    assert found.actions == ("jump", "left", "up") and len(found) == 3 and found.skipped == 2


def test_k_step_items_span_k_actions_and_answer_the_first(tmp_path, caplog):
    root = tmp_path / "data"
    for i in range(5):
        shot(root / "ep" / f"{i}.png", 40 * i)
    actions = [
        {"action": "click", "x": 3, "y": 4},
        {"action": "scroll", "direction": "down"},
        {"action": "teleport"},
        {"action": "navigate_back"},
    ]  # a bad third action: never answered at K=3
    rows = [
        {"episode_id": 1, "screenshots": [f"ep/{i}.png" for i in range(5)], "actions": actions},
        {"episode_id": 2, "screenshots": ["ep/0.png", "ep/1.png", "ep/2.png"], "actions": actions[:2]},
    ]
    path = write_jsonl(root / "e.jsonl", rows)
    with caplog.at_level(logging.WARNING):
        source = GUITrajectories(path, steps=3)
    assert len(source) == 2 and source.skipped == 1  # episode 2 has 2 actions, fewer than 3
    assert any("fewer than steps=3" in r.getMessage() for r in caplog.records)
    first, second = source[0], source[1]
    assert first.action == actions[0] and second.action == actions[1]
    assert first.steps == second.steps == 3
    # screenshot t before, screenshot t + 3 after
    assert np.asarray(first.before)[0, 0, 0] == 0 and np.asarray(first.after)[0, 0, 0] == 120
    assert np.asarray(second.before)[0, 0, 0] == 40 and np.asarray(second.after)[0, 0, 0] == 160
    assert "step 0 to 3" in source.describe(0)
    one = GUITrajectories(path)  # K = 1: the bad action is a step of its own, skipped
    assert len(one) == 5 and one[0].steps == 1 and np.asarray(one[0].after)[0, 0, 0] == 40
    with pytest.raises(ValueError, match="steps"):
        GUITrajectories(path, steps=0)
