"""AnomalyGrounding: the altered frames are exactly the stated interval; IoU scoring and strict
parsing."""

import random

import numpy as np
import pytest

from tasks import AnomalyGrounding, SkipItem, Video
from tasks.answers import temporal_iou
from tasks.video.anomaly_grounding import PERTURBATIONS
from tests.helpers import make_item

# every frame of the stretch differs from the source under these; stutter keeps each held frame
EVERY_FRAME = sorted(set(PERTURBATIONS) - {"stutter"})


def _video_part(example):
    (part,) = [part for part in example.messages[0]["content"] if part["type"] == "video"]
    return part


def _changed(example, item):
    """Indices of the shown frames that differ from the source."""
    video = _video_part(example)["video"]
    frames = item.frames[: len(video)]
    return [t for t in range(len(video)) if not np.array_equal(video[t], frames[t])]


@pytest.mark.parametrize("kind", EVERY_FRAME)
def test_changed_frames_are_exactly_the_answer_interval(kind):
    task = AnomalyGrounding(perturbations=[kind], min_len=3, max_len=6)
    for seed in range(5):
        item = make_item("video", seed=seed)  # 16 distinct frames at 4 fps
        example = task.make_example(item, random.Random(seed))
        changed = _changed(example, item)
        assert changed == list(range(changed[0], changed[-1] + 1)), "one contiguous stretch"
        assert 3 <= len(changed) <= 6
        start, end = example.answer  # seconds, to the 0.1 s the answer is written in
        assert start == pytest.approx(changed[0] / 4, abs=0.05 + 1e-9)
        assert end == pytest.approx((changed[-1] + 1) / 4, abs=0.05 + 1e-9)
        assert example.meta["perturbation"] == kind


def test_stutter_holds_frames_of_the_stretch_only():
    item = make_item("video", seed=1)
    task = AnomalyGrounding(perturbations=["stutter"], min_len=6, max_len=6)
    for seed in range(5):
        example = task.make_example(item, random.Random(seed))
        start, stop = example.meta["start_frame"], example.meta["stop_frame"]
        video = _video_part(example)["video"]
        assert all(t in range(start, stop) for t in _changed(example, item)) and _changed(example, item)
        assert np.array_equal(video[start], item.frames[start])  # the freeze starts on a real frame
        for t in range(start, stop):  # every frame of the stretch repeats an earlier one of the stretch
            assert any(np.array_equal(video[t], item.frames[s]) for s in range(start, t + 1))


def test_stretch_stays_inside_and_shrinks_for_short_videos():
    for t in [4, 5, 6, 10, 17, 40, 64]:
        item = Video(np.zeros((t, 8, 8, 3), np.uint8), fps=2.0)
        usable = t - t % 2  # an odd last frame is dropped
        for seed in range(30):
            meta = AnomalyGrounding().make_example(item, random.Random(seed)).meta
            length = meta["stop_frame"] - meta["start_frame"]
            assert 0 <= meta["start_frame"] and meta["stop_frame"] <= usable
            if usable < 16:  # both bounds shrink to half the video
                assert length == usable // 2
            else:
                assert 8 <= length <= 16


def test_too_short_raises_skip_item():
    with pytest.raises(SkipItem):
        AnomalyGrounding().make_example(Video(np.zeros((3, 8, 8, 3), np.uint8), fps=1.0), random.Random(0))
    with pytest.raises(SkipItem):  # not RGB
        AnomalyGrounding().make_example(Video(np.zeros((8, 8, 8), np.uint8), fps=1.0), random.Random(0))


def _example_with_answer(task, item, truth):
    for seed in range(300):
        example = task.make_example(item, random.Random(seed))
        if example.answer == truth:
            return example
    raise AssertionError(f"{truth} never drawn")


@pytest.mark.parametrize(
    "answer, accuracy",
    [
        ("2.0-4.0", 1.0),
        ("2-4", 1.0),
        (" 2.0 - 4.0 ", 1.0),
        ("2.00-4.000", 1.0),
        ("3.0-5.0", 1 / 3),  # overlap 1 s of a 3 s union
        ("0.0-10.0", 0.2),
        ("2.5-3.0", 0.25),
        ("4.0-6.0", 0.0),
        ("3.0-3.0", 0.0),
        ("4-2", 0.0),  # reversed: well formed, never right
        ("2.0-4.0 seconds", None),
        ("2.0s-4.0s", None),
        ("from 2.0 to 4.0", None),
        ("2.0-4.0-6.0", None),
        ("-1-4", None),
        (".5-4", None),
        ("2.-4", None),
        ("2,0-4,0", None),
        ("1e0-4", None),
        ("2.0", None),
        ("9" * 400 + "-" + "9" * 400, None),  # overflows to infinity
    ],
)
def test_iou_and_strict_parsing(answer, accuracy):
    item = Video(make_item("video").frames[:8], fps=1.0)
    task = AnomalyGrounding(perturbations=["invert"], min_len=2, max_len=2, answer_format="bare", format_weight=0.5)
    example = _example_with_answer(task, item, [2.0, 4.0])
    reward = task.verify(example, answer)
    if accuracy is None:  # not a valid answer: no format reward either
        assert reward.parts == {"accuracy": 0.0, "format": 0.0}
    else:
        assert reward.parts == pytest.approx({"accuracy": accuracy, "format": 1.0})


def test_temporal_iou_hand_computed():
    assert temporal_iou((3.0, 5.0), (2.0, 4.0)) == pytest.approx(1 / 3)
    assert temporal_iou((2.0, 4.0), (2.0, 4.0)) == 1.0
    assert temporal_iou((0.0, 1.0), (2.0, 4.0)) == 0.0
    assert temporal_iou((4.0, 2.0), (2.0, 4.0)) == 0.0
    assert temporal_iou((1.5, 1.5), (1.5, 1.5)) == 1.0  # a stretch shorter than the rounding


def test_rendered_answer_rounds_to_a_tenth():
    item = Video(make_item("video").frames, fps=3.0)  # frame times in thirds of a second
    task = AnomalyGrounding(answer_format="bare")
    for seed in range(10):
        example = task.make_example(item, random.Random(seed))
        start, stop = example.meta["start_frame"], example.meta["stop_frame"]
        assert task.answer_text(example) == f"{start / 3:.1f}-{stop / 3:.1f}"
        assert task.verify(example, task.answer_text(example)).parts["accuracy"] == 1.0


@pytest.mark.parametrize("kind", sorted(PERTURBATIONS))
def test_each_perturbation_changes_the_frames_and_keeps_their_shape(kind):
    frames = make_item("video", seed=3).frames[4:10]
    before = frames.copy()
    out = PERTURBATIONS[kind](frames, random.Random(0))
    assert np.array_equal(frames, before), "pure: the input is not modified"
    assert out.shape == frames.shape and out.dtype == np.uint8
    changed = [not np.array_equal(a, b) for a, b in zip(out, frames, strict=True)]
    # stutter keeps each held frame and repeats it; frame 1 always repeats frame 0
    assert changed[1] if kind == "stutter" else all(changed)
    again = PERTURBATIONS[kind](frames, random.Random(0))
    assert np.array_equal(out, again), "a function of the rng"


@pytest.mark.parametrize("kind", ["mirror", "rotate180", "channel_swap", "invert"])
def test_involutions(kind):
    frames = make_item("video").frames[:4]
    twice = PERTURBATIONS[kind](PERTURBATIONS[kind](frames, random.Random(0)), random.Random(1))
    assert np.array_equal(twice, frames)


def test_perturbations_by_hand():
    frames = make_item("video").frames[:2]
    rng = random.Random(0)
    assert np.array_equal(PERTURBATIONS["mirror"](frames, rng)[1, 5, 0], frames[1, 5, -1])
    assert np.array_equal(PERTURBATIONS["rotate180"](frames, rng)[1, 0, 0], frames[1, -1, -1])
    assert np.array_equal(PERTURBATIONS["channel_swap"](frames, rng)[0, 3, 4], frames[0, 3, 4, ::-1])
    assert np.array_equal(PERTURBATIONS["invert"](frames, rng)[0, 3, 4], 255 - frames[0, 3, 4])
    gray = PERTURBATIONS["grayscale"](frames, rng)
    assert (gray[..., 0] == gray[..., 1]).all() and (gray[..., 1] == gray[..., 2]).all()
    small = PERTURBATIONS["zoom_out"](frames, rng)
    assert (small[:, 0] == 0).all() and (small[:, :, -1] == 0).all()  # a black border
    noisy = [PERTURBATIONS["noise"](frames, random.Random(seed)) for seed in (0, 0, 1)]
    assert np.array_equal(noisy[0], noisy[1]) and not np.array_equal(noisy[0], noisy[2])


def test_shuffle_moves_every_frame_and_keeps_them_all():
    frames = np.arange(10, dtype=np.uint8)[:, None, None, None].repeat(3, axis=-1)
    for seed in range(20):
        order = PERTURBATIONS["shuffle"](frames, random.Random(seed))[:, 0, 0, 0].tolist()
        assert sorted(order) == list(range(10)) and all(o != i for i, o in enumerate(order))


def test_prompt_describes_the_perturbation():
    item = make_item("video")
    prompts = {
        kind: AnomalyGrounding(perturbations=[kind]).make_example(item, random.Random(0)).prompt_text
        for kind in PERTURBATIONS
    }
    assert len(set(prompts.values())) == len(PERTURBATIONS)
    assert "upside down" in prompts["rotate180"] and "4.0 seconds" in prompts["mirror"]


@pytest.mark.parametrize(
    "kwargs",
    [{"perturbations": []}, {"perturbations": ["mirror", "sepia"]}, {"min_len": 1}, {"min_len": 9, "max_len": 8}],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        AnomalyGrounding(**kwargs)


def test_saturation_by_hand_and_against_pil():
    from PIL import Image, ImageEnhance

    pixel = np.array([[[[100, 50, 150]]]], np.uint8)
    # luma 0.299 * 100 + 0.587 * 50 + 0.114 * 150 = 76.35 -> 76; each channel moved twice as far
    # from 76
    assert PERTURBATIONS["saturation"](pixel, random.Random(0)).tolist() == [[[[124, 24, 224]]]]
    assert PERTURBATIONS["saturation"](np.array([[[[250, 10, 10]]]], np.uint8), random.Random(0)).tolist() == [
        [[[255, 0, 0]]]
    ]  # clipped
    frames = make_item("video", seed=2).frames[:2]
    pil = np.stack([np.asarray(ImageEnhance.Color(Image.fromarray(f)).enhance(2.0)) for f in frames])
    assert np.abs(PERTURBATIONS["saturation"](frames, random.Random(0)).astype(int) - pil).max() <= 1


def test_quarter_turns_by_hand():
    square = np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3)  # pixels a b / c d
    a, b, c, d = square[0, 0, 0], square[0, 0, 1], square[0, 1, 0], square[0, 1, 1]
    clockwise = PERTURBATIONS["rotate90"](square, random.Random(0))[0]
    assert np.array_equal(clockwise, np.stack([np.stack([c, a]), np.stack([d, b])]))  # c a / d b
    counter = PERTURBATIONS["rotate270"](square, random.Random(0))[0]
    assert np.array_equal(counter, np.stack([np.stack([b, d]), np.stack([a, c])]))  # b d / a c
    wide = make_item("video").frames[:2]  # 48 x 64: turned it is 64 x 48, shrunk by 0.75 to 48 x 36
    for kind in ("rotate90", "rotate270"):
        turned = PERTURBATIONS[kind](wide, random.Random(0))
        assert turned.shape == wide.shape
        assert (turned[:, :, :14] == 0).all() and (turned[:, :, 50:] == 0).all()  # black bars left and right
        assert (turned[:, :, 14:50].reshape(2, -1, 3).max(axis=1) > 0).all()
    # the top-left corner of a clockwise turn shows the bottom-left of the frame
    turned = PERTURBATIONS["rotate90"](wide, random.Random(0))
    assert np.abs(turned[0, 0, 14].astype(int) - wide[0, -1, 0]).max() < 30


def test_swap_shows_the_same_frames_of_another_video():
    item, other = make_item("video", seed=0), make_item("video", seed=1)
    task = AnomalyGrounding(perturbations=["swap"], min_len=4, max_len=6)
    assert task.partners == 1 and AnomalyGrounding().partners == 0
    for seed in range(4):
        example = task.make_example([item, other], random.Random(seed))
        start, stop = example.meta["start_frame"], example.meta["stop_frame"]
        video = _video_part(example)["video"]
        assert np.array_equal(video[start:stop], other.frames[start:stop])
        assert np.array_equal(video[:start], item.frames[:start]) and np.array_equal(video[stop:], item.frames[stop:])
        assert "different video" in example.prompt_text
    small = Video(other.frames[:5, ::2, ::2], fps=4.0)  # half the size, 5 frames: resized, positions wrap
    example = task.make_example([item, small], random.Random(0))
    start, stop = example.meta["start_frame"], example.meta["stop_frame"]
    video = _video_part(example)["video"]
    assert video.shape == item.frames.shape
    assert np.abs(video[start].astype(int) - np.repeat(np.repeat(small.frames[start % 5], 2, 0), 2, 1)).mean() < 12
    alone = task.make_example(item, random.Random(0))  # one video: the frames half of it away
    start, stop = alone.meta["start_frame"], alone.meta["stop_frame"]
    shown = _video_part(alone)["video"]
    assert all(np.array_equal(shown[t], item.frames[(t + 8) % 16]) for t in range(start, stop))


def test_swap_through_the_data_module_takes_another_video_of_the_split():
    from datamodules import PretextDataModule
    from datamodules.sources.base import Source

    class Videos(Source):
        """Sample videos that differ in their noise."""

        modality = "video"
        videos = [make_item("video", seed=s) for s in range(6)]

        def __len__(self):
            return len(self.videos)

        def __getitem__(self, index):
            return self.videos[index]

    source = Videos()
    dm = PretextDataModule(
        source, AnomalyGrounding(perturbations=["swap"], min_len=4, max_len=6), batch_size=3, val_size=0
    )
    examples = [e for batch in dm.train_dataloader() for e in batch]
    assert len(examples) == 6
    for example in examples:
        start, stop = example.meta["start_frame"], example.meta["stop_frame"]
        video = _video_part(example)["video"]
        (own,) = [
            i
            for i, v in enumerate(source.videos)
            if np.array_equal(video[:start], v.frames[:start]) and np.array_equal(video[stop:], v.frames[stop:])
        ]
        donors = [i for i, v in enumerate(source.videos) if np.array_equal(video[start:stop], v.frames[start:stop])]
        assert donors and own not in donors
