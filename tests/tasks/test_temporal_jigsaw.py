"""TemporalJigsaw: the source frames are rebuilt from the shown clips and the rendered answer, frame
for frame."""

import math
import random
import re

import numpy as np
import pytest

from tasks import SkipItem, TemporalJigsaw, Video, answers
from tests.helpers import make_item


def _video(t, fps=2.0):
    """``t`` (< 64) frames; frame ``i`` is ``4 i`` plus a fixed pattern, so every frame is told by
    its value."""
    pattern = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3) % 7
    frames = (np.arange(t)[:, None, None, None] * 4 + pattern).astype(np.uint8)
    return Video(frames=frames, fps=fps, name=f"test-{t}")


def _cut(size, trim):
    """Frames dropped at each end of a clip of ``size``: each frame showing some trimmed time."""
    return math.ceil(round(size * trim, 9))


def _expected(frames, k, trim, composite=False):
    """What the arguments promise: ``k`` equal clips (leftover dropped at the end), `_cut` frames
    dropped at each end of each clip, in chronological order; each clip's length rounded down to
    even, except back to back (composite) where only the total must be even."""
    size = len(frames) // k
    cut = _cut(size, trim)
    length = size - 2 * cut
    if not composite or (length * k) % 2:
        length = length // 2 * 2
    return np.concatenate([frames[i * size + cut : i * size + cut + length] for i in range(k)])


def _videos(example):
    return [part for part in example.messages[0]["content"] if part["type"] == "video"]


def _shown_clips(example, k, composite):
    """The clips in the order the policy sees them numbered, recovered from the prompt alone."""
    content = example.messages[0]["content"]
    videos = [part["video"] for part in _videos(example)]
    if composite:
        (video,) = videos
        return np.split(video, k)  # clips of equal length, played back to back
    labels = [content[i - 1]["text"] for i, part in enumerate(content) if part["type"] == "video"]
    assert labels == [f"Clip {i}:" for i in range(1, k + 1)]
    return videos


@pytest.mark.parametrize("composite", [False, True])
@pytest.mark.parametrize("k", [2, 3, 4, 5])
@pytest.mark.parametrize("trim", [0.0, 0.1, 0.2])
def test_rendered_answer_rebuilds_the_source(k, composite, trim):
    task = TemporalJigsaw(clips=k, trim=trim, composite=composite, think=True)
    for seed in range(4):
        item = _video(7 * k + 3 * seed + 1)  # lengths no clip count divides evenly
        example = task.make_example(item, random.Random(seed))
        answer, _ = answers.extract(task.render_answer(example), "tags", think=True)
        order = answers.parse_permutation(answer, k)
        rebuilt = np.concatenate(answers.restore(_shown_clips(example, k, composite), order))
        assert np.array_equal(rebuilt, _expected(item.frames, k, trim, composite))


@pytest.mark.parametrize(
    "t, k, trim, kept",
    [
        (16, 3, 0.0, [range(0, 4), range(5, 9), range(10, 14)]),  # clips of 5 frames cut to 4 (15 is odd)
        (14, 2, 0.0, [range(0, 7), range(7, 14)]),  # 2 clips of 7: an even total, kept whole
        (40, 2, 0.1, [range(2, 18), range(22, 38)]),  # clips of 20: 2 dropped at each end
        # clips of 6: 1.2 frames' time trimmed at each end, which the first two frames show
        (24, 4, 0.2, [range(2, 4), range(8, 10), range(14, 16), range(20, 22)]),
        (9, 4, 0.0, [range(0, 2), range(2, 4), range(4, 6), range(6, 8)]),  # the 9th frame is left over
    ],
)
def test_clip_boundaries_hand_computed(t, k, trim, kept):
    item = _video(t)
    task = TemporalJigsaw(clips=k, trim=trim, composite=True)
    example = task.make_example(item, random.Random(0))
    clips = answers.restore(_shown_clips(example, k, composite=True), example.answer)
    assert [[int(frame[0, 0, 0]) // 4 for frame in clip] for clip in clips] == [list(r) for r in kept]


@pytest.mark.parametrize("composite", [False, True])
def test_a_small_trim_still_leaves_out_the_frames_at_clip_boundaries(composite):
    # 3 clips of 8 frames, trim 0.05: 0.4 of a frame's time is cut at each end of each clip, which
    # rounds to no frame; but the first and last frames of a clip show that time, so they are out
    task = TemporalJigsaw(clips=3, trim=0.05, composite=composite)
    example = task.make_example(_video(24), random.Random(0))
    clips = answers.restore(_shown_clips(example, 3, composite), example.answer)
    kept = [[int(frame[0, 0, 0]) // 4 for frame in clip] for clip in clips]
    assert kept == [list(range(1, 7)), list(range(9, 15)), list(range(17, 23))]


@pytest.mark.parametrize(
    "kwargs, kept, fps",
    [
        # clips of 20 frames (10 s at 2 fps), 2 cut at each end: 16 central frames, 8 s
        ({}, [range(2, 18), range(22, 38)], 2.0),
        # at most 4 of them, at the middles of 4 equal parts of the central 16 frames: 0.5 fps
        ({"frames_per_clip": 4}, [range(4, 18, 4), range(24, 38, 4)], 0.5),
        # at most 0.75 per second of the central 8 s: 6, 16/6 frames apart on average
        ({"fps": 0.75}, [[3, 6, 8, 11, 14, 16], [23, 26, 28, 31, 34, 36]], 0.75),
        ({"frames_per_clip": 4, "fps": 0.75}, [range(4, 18, 4), range(24, 38, 4)], 0.5),
    ],
)
@pytest.mark.parametrize("composite", [False, True])
def test_frames_are_taken_evenly_from_the_central_part_of_each_clip(kwargs, kept, fps, composite):
    task = TemporalJigsaw(clips=2, trim=0.1, composite=composite, **kwargs)
    example = task.make_example(_video(40), random.Random(0))
    clips = answers.restore(_shown_clips(example, 2, composite), example.answer)
    shown = [[int(frame[0, 0, 0]) // 4 for frame in clip] for clip in clips]
    assert shown == [list(r) for r in kept]
    assert {part["fps"] for part in _videos(example)} == {fps}
    assert example.meta["clip_frames"] == len(kept[0])


@pytest.mark.parametrize("composite", [False, True])
def test_every_video_part_has_an_even_frame_count(composite):
    rng = random.Random(0)
    for _ in range(60):
        k, t, trim = rng.randint(2, 5), rng.randint(10, 61), rng.choice([0.0, 0.05, 0.1, 0.25, 0.4])
        try:
            example = TemporalJigsaw(clips=k, trim=trim, composite=composite).make_example(_video(t), rng)
        except SkipItem:
            assert (t // k - 2 * _cut(t // k, trim)) < 2
            continue
        lengths = [len(part["video"]) for part in _videos(example)]
        assert len(lengths) == (1 if composite else k)
        assert all(n >= 2 and n % 2 == 0 for n in lengths), (k, t, trim, lengths)
        if not composite:  # separate clips fill whole frame pairs; back to back, only the total must be even
            assert example.meta["clip_frames"] % 2 == 0


def test_parts_carry_the_frame_rate():
    example = TemporalJigsaw().make_example(_video(30, fps=3.0), random.Random(0))
    assert [part["fps"] for part in _videos(example)] == [3.0, 3.0, 3.0]


def test_choice_letters_map_to_the_listed_orders():
    task = TemporalJigsaw(clips=3, style="choice", answer_format="bare")
    for seed in range(12):
        example = task.make_example(make_item("video"), random.Random(seed))
        listed = dict(re.findall(r"^([A-Z])\) (\d(?:, \d)*)$", example.prompt_text, flags=re.MULTILINE))
        assert len(listed) == 6 and len(set(listed.values())) == 6  # every order of 3 clips, once each
        assert listed["A"] == "1, 2, 3" and listed["F"] == "3, 2, 1"
        right = task.answer_text(example)
        assert answers.parse_permutation(listed[right], 3) == example.answer
        for letter, order in listed.items():
            expected = answers.permutation_scores(answers.parse_permutation(order, 3), example.answer)
            parts = task.score(example, letter)
            assert {key: parts[key] for key in expected} == expected
            assert parts["accuracy"] == expected["footrule"]
            assert (parts["exact"] == 1.0) == (letter == right)
        assert task.score(example, f"({right.lower()})")["exact"] == 1.0
        for invalid in ["G", "1, 2, 3", "AB", right + ") " + listed[right]]:
            assert task.score(example, invalid) is None, invalid


def test_choice_lists_both_orders_of_two_clips():
    example = TemporalJigsaw(clips=2, style="choice").make_example(make_item("video"), random.Random(0))
    assert "A) 1, 2\nB) 2, 1\n" in example.prompt_text


def test_choice_beyond_four_clips_raises():
    TemporalJigsaw(clips=4, style="choice")
    with pytest.raises(ValueError, match="at most 4"):
        TemporalJigsaw(clips=5, style="choice")


def _example_with_answer(task, truth):
    for seed in range(200):
        example = task.make_example(_video(24), random.Random(seed))
        if example.answer == truth:
            return example
    raise AssertionError(f"{truth} never drawn")


@pytest.mark.parametrize(
    "reward, accuracy",
    # truth 1, 2, 3 answered 2, 1, 3: one of three in place; footrule distance 2 of max floor(9 / 2)
    # = 4
    [("exact", 0.0), ("fraction", 1 / 3), ("footrule", 0.5)],
)
def test_reward_modes_on_one_swap(reward, accuracy):
    task = TemporalJigsaw(reward=reward, answer_format="bare")
    example = _example_with_answer(task, [1, 2, 3])
    parts = task.verify(example, "2, 1, 3").parts
    assert parts == pytest.approx(
        {"accuracy": accuracy, "exact": 0.0, "fraction": 1 / 3, "footrule": 0.5, "format": 1.0}
    )


def test_reversed_order_scores_zero_footrule():
    task = TemporalJigsaw(clips=4, answer_format="bare")
    example = _example_with_answer(task, [1, 2, 3, 4])
    assert task.score(example, "4321")["footrule"] == 0.0  # the VideoSSR digit-string form is accepted


@pytest.mark.parametrize("answer", ["1, 1, 2", "1, 2", "1, 2, 3, 4", "0, 1, 2", "A", "2, 1, 3 or 1, 2, 3"])
def test_non_permutations_earn_nothing(answer):
    task = TemporalJigsaw(answer_format="bare", format_weight=0.5)
    example = _example_with_answer(task, [1, 2, 3])
    reward = task.verify(example, answer)
    assert reward.parts == {"accuracy": 0.0, "exact": 0.0, "fraction": 0.0, "footrule": 0.0, "format": 0.0}
    assert reward.total == 0.0


def test_partial_credit_scales_valid_wrong_orders_only():
    task = TemporalJigsaw(partial_credit=0.2, answer_format="bare", format_weight=0.2)
    example = _example_with_answer(task, [1, 2, 3])
    assert task.verify(example, "2, 1, 3").total == pytest.approx(0.2 * 0.5 + 0.2)
    assert task.verify(example, "1, 2, 3").total == pytest.approx(1.0 + 0.2)


def test_meta_records_the_shown_order():
    example = TemporalJigsaw(clips=5).make_example(_video(40), random.Random(1))
    assert sorted(example.meta["shown"]) == list(range(5))
    assert example.answer == answers.shuffle_answer(example.meta["shown"])
    assert example.meta["clip_frames"] == 8


def test_too_short_raises_skip_item():
    with pytest.raises(SkipItem):
        TemporalJigsaw(clips=3).make_example(_video(5), random.Random(0))  # clips of 1 frame
    TemporalJigsaw(clips=3).make_example(_video(6), random.Random(0))
    # clips of 10 frames: trim 0.4 drops 4 at each end and leaves 2, trim 0.49 drops 5 and leaves
    # none
    TemporalJigsaw(clips=2, trim=0.4).make_example(_video(20), random.Random(0))
    with pytest.raises(SkipItem):
        TemporalJigsaw(clips=2, trim=0.49).make_example(_video(20), random.Random(0))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"clips": 1},
        {"trim": 0.5},
        {"trim": -0.1},
        {"style": "letters"},
        {"reward": "kendall"},
        {"partial_credit": 1.5},
        {"clips": 6, "style": "choice"},
        {"frames_per_clip": 3},
        {"frames_per_clip": 0},
        {"fps": 0.0},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        TemporalJigsaw(**kwargs)
