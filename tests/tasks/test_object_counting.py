"""ObjectCounting: shapes land exactly on the chosen frames, the counts match what is drawn, scores
by hand."""

import dataclasses
import random
from collections import deque

import numpy as np
import pytest

from tasks import ObjectCounting, SkipItem, Video
from tests.helpers import make_item


def _black(t, h=60, w=80):
    return Video(np.zeros((t, h, w, 3), np.uint8), fps=2.0, name=f"black-{t}")


def _video(example):
    (part,) = [part for part in example.messages[0]["content"] if part["type"] == "video"]
    return part["video"]


def _components(mask):
    """Number of 8-connected regions of a boolean mask (a rasterised sharp corner hangs on by a
    diagonal)."""
    seen, count = np.zeros_like(mask), 0
    for start in zip(*np.nonzero(mask), strict=True):
        if seen[start]:
            continue
        count += 1
        queue, seen[start] = deque([start]), True
        while queue:
            y, x = queue.popleft()
            for ny, nx in [(y + dy, x + dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]:
                if 0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    queue.append((ny, nx))
    return count


def test_drawn_frames_differ_from_the_source_exactly_on_the_chosen_frames():
    task = ObjectCounting()
    for seed in range(8):
        item = make_item("video", seed=seed)
        example = task.make_example(item, random.Random(seed))
        video = _video(example)
        changed = {t for t in range(len(video)) if not np.array_equal(video[t], item.frames[t])}
        assert changed == {t for frames in example.meta["frames"].values() for t in frames}


def test_counts_are_the_shapes_drawn():
    # on black, every shape is one separate blob (shapes never touch), all in the central 70% and
    # bright
    task = ObjectCounting(max_frames_per_kind=3, max_per_frame=3)
    for seed in range(20):
        example = task.make_example(_black(48), random.Random(seed))
        video = _video(example)
        for kind, count in zip(["circle", "square", "triangle"], example.answer, strict=True):
            frames = example.meta["frames"][kind]
            assert 1 <= len(frames) <= 3 and len(frames) <= count <= 3 * len(frames)
            assert sum(_components(video[t].any(axis=-1)) for t in frames) == count
        ys, xs = np.nonzero(video.any(axis=-1).any(axis=0))
        assert ys.min() >= 0.15 * 60 - 1 and ys.max() <= 0.85 * 60 and xs.min() >= 0.15 * 80 - 1
        assert xs.max() <= 0.85 * 80
        painted = video[video.any(axis=-1)]
        assert (painted >= 50).all()


def test_frames_respect_min_gap_and_are_not_shared_across_kinds():
    task = ObjectCounting(max_frames_per_kind=3, min_gap=8)
    for seed in range(30):
        meta = task.make_example(_black(48, 20, 20), random.Random(seed)).meta
        assert meta["min_gap"] == 8  # 3 frames 8 apart fit in 48
        chosen = [t for frames in meta["frames"].values() for t in frames]
        assert len(chosen) == len(set(chosen))
        for frames in meta["frames"].values():
            assert (np.diff(frames) >= 8).all()


@pytest.mark.parametrize("t, gap", [(16, 5), (6, 2), (24, 8), (3, 1)])
def test_min_gap_shrinks_for_short_videos(t, gap):
    # so that max_frames_per_kind = 3 frames can fit: t // 3, with an odd last frame dropped
    meta = ObjectCounting(kinds=["circle", "square"]).make_example(_black(t, 20, 20), random.Random(0)).meta
    assert meta["min_gap"] == gap


def test_every_kind_gets_a_frame_in_a_short_video():
    task = ObjectCounting(max_frames_per_kind=3, min_gap=1)
    for seed in range(30):
        example = task.make_example(_black(4, 20, 20), random.Random(seed))
        assert all(count >= 1 for count in example.answer)
        chosen = [t for frames in example.meta["frames"].values() for t in frames]
        assert len(chosen) == len(set(chosen)) <= 4


def _with_truth(truth, **kwargs):
    """An example of the task whose hidden counts are replaced by ``truth`` (scoring reads only
    these)."""
    task = ObjectCounting(answer_format="bare", format_weight=0.5, **kwargs)
    example = task.make_example(make_item("video"), random.Random(0))
    return task, dataclasses.replace(example, answer=truth)


@pytest.mark.parametrize(
    "answer, accuracy, exact",
    [
        ("3,2,4", 1.0, 1.0),
        (" 3 , 2,4 ", 1.0, 1.0),
        ("3,1,4", (1 + 0.5 + 1) / 3, 0.0),  # squares off by one of two
        ("9,2,4", (0 + 1 + 1) / 3, 0.0),  # an error beyond the truth is clipped at 0
        ("0,0,0", 0.0, 0.0),
        ("4,4,2", (2 / 3 + 0 + 0.5) / 3, 0.0),
        ("3,2", None, None),
        ("3,2,4,1", None, None),
        ("3;2;4", None, None),
        ("3 2 4", None, None),
        ("3,2,4.", None, None),
        ("-3,2,4", None, None),
        ("three,2,4", None, None),
        ("3,,2,4", None, None),
        ("circles: 3, squares: 2, triangles: 4", None, None),
    ],
)
def test_scores_by_hand(answer, accuracy, exact):
    task, example = _with_truth([3, 2, 4])
    reward = task.verify(example, answer)
    if accuracy is None:
        assert reward.parts == {"accuracy": 0.0, "exact": 0.0, "format": 0.0}
    else:
        assert reward.parts == pytest.approx({"accuracy": accuracy, "exact": exact, "format": 1.0})


@pytest.mark.parametrize(
    "answer, accuracy",
    [
        ("3,2,4", 1.0),
        ("The answer is 3, 2, 4", 1.0),
        ("circles: 3, squares: 2, triangles: 4", 1.0),
        ("3 2 4", 1.0),
        ("-3;2;4.", 1.0),  # every run of digits is a number, signs and separators aside
        ("3 circles, 1 square, 4 triangles", (1 + 0.5 + 1) / 3),
        ("3,2", None),
        ("3, 2, 4 and 1", None),
        ("3.5, 2, 4", None),  # 4 numbers: 3, 5, 2, 4
        ("three, two, four", None),
        ("1234567890,2,4", None),  # a 10-digit run is no count
    ],
)
def test_numbers_parse_reads_every_number_as_videossr_does(answer, accuracy):
    task, example = _with_truth([3, 2, 4], parse="numbers")
    reward = task.verify(example, answer)
    if accuracy is None:
        assert reward.parts == {"accuracy": 0.0, "exact": 0.0, "format": 0.0}
    else:
        assert reward.parts["accuracy"] == pytest.approx(accuracy) and reward.parts["format"] == 1.0
    strict, example = _with_truth([3, 2, 4])
    if answer not in ("3,2,4",):
        assert strict.verify(example, answer).parts["format"] == 0.0  # the default reads counts only


def test_kinds_set_the_question_and_answer_order():
    task = ObjectCounting(kinds=["triangle", "circle"], answer_format="bare")
    example = task.make_example(make_item("video"), random.Random(0))
    assert "triangles and circles" in example.prompt_text
    assert list(example.meta["frames"]) == ["triangle", "circle"]
    assert task.score(example, "1,1,1") is None  # two kinds, two numbers
    assert task.score(example, task.answer_text(example)) == {"accuracy": 1.0, "exact": 1.0}


def test_unusable_videos_raise_skip_item():
    with pytest.raises(SkipItem):  # two usable frames for three kinds
        ObjectCounting().make_example(_black(3), random.Random(0))
    with pytest.raises(SkipItem):  # too small to draw on
        ObjectCounting().make_example(_black(8, 12, 40), random.Random(0))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kinds": []},
        {"kinds": ["circle", "circle"]},
        {"kinds": ["star"]},
        {"max_frames_per_kind": 0},
        {"max_per_frame": 0},
        {"min_gap": 0},
        {"parse": "loose"},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        ObjectCounting(**kwargs)
