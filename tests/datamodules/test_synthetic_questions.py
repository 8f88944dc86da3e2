"""SyntheticQuestions: every answer agrees with the drawn pixels (or the ray-cast depth), items are
reproducible, and the test split shares no item with the training split or with the training
sources."""

import hashlib

import numpy as np
import pytest

pytest.importorskip("open3d")

from datamodules import SyntheticQuestions, SyntheticRGBD, SyntheticScenes  # noqa: E402
from datamodules.sources.synthetic_questions import QUESTION_KINDS  # noqa: E402

RED, BLUE = np.array([242, 38, 38]), np.array([51, 77, 255])


def near(pixels: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Pixels within the noise of ``colour``, ``[H, W]`` bool."""
    return np.abs(pixels.astype(int) - colour).max(-1) < 40


def centroid(mask: np.ndarray) -> np.ndarray:
    rows, cols = np.nonzero(mask)
    return np.array([cols.mean(), rows.mean()])


def components(mask: np.ndarray) -> int:
    """Number of 4-connected blobs of ``mask`` (a flood fill)."""
    seen, count = np.zeros_like(mask), 0
    for start in zip(*np.nonzero(mask), strict=True):
        if seen[start]:
            continue
        count, stack = count + 1, [start]
        while stack:
            r, c = stack.pop()
            if 0 <= r < mask.shape[0] and 0 <= c < mask.shape[1] and mask[r, c] and not seen[r, c]:
                seen[r, c] = True
                stack += [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]
    return count


@pytest.fixture(scope="module")
def source():
    return SyntheticQuestions(size=48, seed=3)


def test_spatial_answer_matches_the_colour_centroids(source):
    for i in range(0, 48, 4):
        q = source[i]
        pixels = np.asarray(q.media[0])
        dx, dy = centroid(near(pixels, RED)) - centroid(near(pixels, BLUE))
        seen = ("left" if dx < 0 else "right") if abs(dx) > abs(dy) else ("above" if dy < 0 else "below")
        assert q.answer == seen and q.choices == ["left", "right", "above", "below"]


def test_counting_answer_matches_the_blobs(source):
    for i in range(1, 48, 4):
        q = source[i]
        pixels = np.asarray(q.media[0]).astype(int)
        bright = pixels.max(-1) > 150  # shapes are saturated, the background at most 0.3 of full scale
        assert components(bright) == int(q.answer)


def test_depth_answer_matches_the_ray_cast_depth(source):
    for i in range(2, 48, 4):
        q = source[i]
        room = next(r for r in range(i * 32, i * 32 + 32) if source._side_by_side(source.rooms.scene(r)["objects"]))
        rgb, depth = source.rooms.render(room)
        assert np.array_equal(np.asarray(q.media[0]), rgb)
        left, right = source._side_by_side(source.rooms.scene(room)["objects"])
        k = source.rooms.intrinsics
        ray = [
            depth[
                int(k[1, 1] * o["centre"][1] / o["centre"][2] + k[1, 2]),
                int(k[0, 0] * o["centre"][0] / o["centre"][2] + k[0, 2]),
            ]
            for o in (left, right)
        ]
        assert q.answer == ("nearer" if ray[0] < ray[1] else "farther")


def test_temporal_answer_matches_the_first_frames_of_each_colour(source):
    for i in range(3, 48, 4):
        q = source[i]
        frames = q.media[0].frames  # [T, H, W, 3]
        first = [next(t for t in range(len(frames)) if near(frames[t], c).sum() > 10) for c in (RED, BLUE)]
        assert first[0] != first[1] and q.answer == ("earlier" if first[0] < first[1] else "later")


def test_items_are_reproducible_and_seeded(source):
    again = SyntheticQuestions(size=48, seed=3)
    other = SyntheticQuestions(size=48, seed=4)
    for i in range(8):
        assert _digest(source[i]) == _digest(again[i]) != _digest(other[i])
    assert [source.kind(i) for i in range(8)] == [*QUESTION_KINDS, *QUESTION_KINDS]


def test_test_split_shares_no_item_with_training_streams():
    test = {_digest(SyntheticQuestions(size=64, split="test")[i]) for i in range(64)}
    train = {_digest(SyntheticQuestions(size=256, split="train", seed=s)[i]) for s in (0, 1) for i in range(256)}
    assert len(test) == 64 and not test & train
    media = {_sha(np.asarray(SyntheticQuestions(size=64)[i].media[0])) for i in range(2, 64, 4)}  # the rooms
    rooms = {
        _sha(SyntheticRGBD(width=56, height=56, objects=(2, 2), seed=s).render(i)[0])
        for s in range(10)
        for i in range(4)
    }
    scenes = {_sha(np.asarray(SyntheticScenes(seed=s)[i])) for s in range(10) for i in range(4)}
    assert not media & (rooms | scenes)


def test_bad_arguments_are_refused():
    for kwargs in ({"kinds": ["colour"]}, {"split": "val"}, {"num_frames": 5}, {"seed": -1}, {"image_size": 8}):
        with pytest.raises(ValueError):
            SyntheticQuestions(**kwargs)
    with pytest.raises(IndexError):
        SyntheticQuestions(size=2)[2]


def _digest(question) -> str:
    media = question.media[0]
    pixels = media.frames if hasattr(media, "frames") else np.asarray(media)
    return hashlib.sha1(pixels.tobytes() + question.answer.encode()).hexdigest()


def _sha(pixels: np.ndarray) -> str:
    return hashlib.sha1(pixels.tobytes()).hexdigest()
