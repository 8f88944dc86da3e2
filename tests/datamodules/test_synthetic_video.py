"""SyntheticVideos: deterministic clips cached as real mp4s, shapes on their recorded paths, a
direction of time."""

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("decord")
pytest.importorskip("av")

import tasks  # noqa: E402
from datamodules import PretextDataModule, SyntheticVideos  # noqa: E402
from tests.datamodules.test_video_folder import FrameCount  # noqa: E402

BRIGHT = 0.7 * 255  # shapes have a channel >= 0.85 of full scale, the background none above 0.62


@pytest.fixture
def source(tmp_path):
    return SyntheticVideos(size=50, root=str(tmp_path))


def bright(frames):
    return frames.max(-1) > BRIGHT  # [T, H, W]


def test_items_are_a_pure_function_of_seed_and_index(tmp_path):
    a = SyntheticVideos(seed=1, root=str(tmp_path / "a"))
    b = SyntheticVideos(seed=1, root=str(tmp_path / "b"))
    for index in (0, 7, 999):
        assert np.array_equal(a[index].frames, b[index].frames)
        assert np.array_equal(a[index].frames, a.render(index))  # lossless: decoding gives what was drawn
        np.testing.assert_array_equal(a.trajectories(index), b.trajectories(index))
    assert not np.array_equal(a[0].frames, a[1].frames)
    assert not np.array_equal(a[0].frames, SyntheticVideos(seed=2, root=str(tmp_path / "a"))[0].frames)


def test_clips_are_written_once_as_real_mp4_files(source, monkeypatch):
    path = source.path(3)
    assert not path.exists()
    video = source[3]
    assert path.is_file() and path.read_bytes()[4:8] == b"ftyp"  # an ISO media (mp4) file
    assert video.name == str(path)
    assert [p.name for p in path.parent.iterdir()] == ["3.mp4"]  # no temporary file left behind
    monkeypatch.setattr("datamodules.sources.synthetic_video._write_mp4", lambda *a: pytest.fail("rewritten"))
    assert np.array_equal(source[3].frames, video.frames)  # the second read decodes the cached file


def test_a_damaged_cache_file_is_drawn_again(source):
    source.path(4).parent.mkdir(parents=True)
    source.path(4).write_bytes(b"not a video at all")
    assert np.array_equal(source[4].frames, source.render(4))


def test_shape_count_fps_and_geometry(tmp_path):
    video = SyntheticVideos(root=str(tmp_path))[0]
    assert video.frames.shape == (16, 56, 56, 3) and video.frames.dtype == np.uint8
    assert video.fps == pytest.approx(4.0) and video.duration == pytest.approx(4.0)
    other = SyntheticVideos(num_frames=8, height=40, width=48, fps=2.5, root=str(tmp_path))  # 48 wide: see decord
    video = other[5]
    assert video.frames.shape == (8, 40, 48, 3) and video.fps == pytest.approx(2.5)
    assert np.array_equal(video.frames, other.render(5))
    assert other.path(5) != SyntheticVideos(root=str(tmp_path)).path(5)  # geometries do not share files


def test_default_cache_is_under_zoo_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path))
    source = SyntheticVideos()
    assert source.path(2).is_relative_to(tmp_path / "videos")
    source[2]
    assert source.path(2).is_file()


def test_shapes_move_along_their_trajectories(source):
    singles = 0
    for index in range(30):
        frames, centres = source[index].frames, source.trajectories(index)  # [T, H, W, 3], [S, T, 2]
        assert centres.shape == (centres.shape[0], 16, 2) and 1 <= centres.shape[0] <= 3
        mask = bright(frames)
        columns, rows = np.floor(centres).astype(int).transpose(2, 0, 1)  # [S, T] each
        assert mask[np.arange(16), rows, columns].all()  # every centre lies on a shape
        if len(centres) == 1:  # a lone shape: its pixels are centred on the recorded centre
            singles += 1
            for t in range(16):
                r, c = np.nonzero(mask[t])
                np.testing.assert_allclose([c.mean() + 0.5, r.mean() + 0.5], centres[0, t], atol=0.5)
        assert np.ptp(centres, axis=1).max(-1).min() > 5  # every shape travels
    assert singles >= 3


def test_straight_lines_at_constant_speed_bouncing_off_the_walls(source):
    bounces = 0
    for index in range(50):
        centres = source.trajectories(index)  # [S, T, 2]
        assert (centres >= 1).all() and (centres[..., 0] < 55).all() and (centres[..., 1] < 55).all()
        steps = np.diff(centres, axis=1)  # [S, T - 1, 2]
        speed = np.abs(steps).max(1, keepdims=True)  # per shape and axis
        straight = np.isclose(np.abs(steps), speed)
        assert straight.mean() > 0.75  # a step is shorter only where it meets a wall
        turns = np.diff(np.sign(steps), axis=1) != 0
        bounces += int(turns.sum())
        assert (turns <= ~straight[:, 1:] | ~straight[:, :-1]).all()  # direction changes only at walls
    assert bounces > 10


def test_the_background_brightens_so_time_has_a_direction(source):
    for index in range(20):
        frames = source[index].frames.astype(float)
        background = ~bright(frames).any(0)  # pixels no shape ever covers
        levels = frames[:, background].mean((1, 2))  # [T]
        assert (np.diff(levels) > 0).all()
        assert levels[-1] - levels[0] > 0.1 * 255


def test_clips_vary(source):
    clips = np.stack([source[i].frames for i in range(12)]).astype(float)
    assert clips.std(0).mean() > 10
    counts = {len(source.trajectories(i)) for i in range(30)}
    assert counts == {1, 2, 3}


def test_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="even"):
        SyntheticVideos(num_frames=7)
    with pytest.raises(ValueError, match="16 pixels"):
        SyntheticVideos(height=8)
    with pytest.raises(ValueError, match="size"):
        SyntheticVideos(size=0)
    source = SyntheticVideos(size=5, root=str(tmp_path))
    assert len(source) == 5 and source.describe(2) == "SyntheticVideos(seed=0)[2]"
    for index in (5, -1):
        with pytest.raises(IndexError):
            source[index]


def test_concurrent_first_reads_agree(source):
    with ThreadPoolExecutor(4) as pool:
        clips = list(pool.map(lambda i: source[i % 2].frames, range(8)))
    assert all(np.array_equal(clip, clips[i % 2]) for i, clip in enumerate(clips))
    assert sorted(p.name for p in source.path(0).parent.iterdir()) == ["0.mp4", "1.mp4"]


def test_fast_enough_for_on_the_fly_data(source):
    start = time.perf_counter()
    for i in range(20):
        source[i]
    first = (time.perf_counter() - start) / 20
    start = time.perf_counter()
    for i in range(20):
        source[i]
    cached = (time.perf_counter() - start) / 20
    assert first < 0.1  # about 20 ms here (draw, encode, decode); loose for CI
    assert cached < first


def test_with_workers_in_a_data_module(tmp_path):
    source = SyntheticVideos(size=12, num_frames=8, root=str(tmp_path))
    dm = PretextDataModule(source, FrameCount(), batch_size=4, val_size=4, num_workers=2)
    batches = list(dm.train_dataloader())
    assert len(batches) == 2 and all(len(b) == 4 for b in batches)
    assert {e.answer for b in batches for e in b} == {"8"} and dm.skipped == 0
    assert len(list(tmp_path.rglob("*.mp4"))) == 8


def test_with_the_real_arrow_of_time_task(source):
    arrow = getattr(tasks, "ArrowOfTime", None)
    if arrow is None:
        pytest.skip("tasks.ArrowOfTime is not written yet")
    dm = PretextDataModule(source, arrow(), batch_size=4, val_size=8)
    batch = next(iter(dm.train_dataloader()))
    for example in batch:
        task = dm.tasks[example.task]
        assert dm.verify(example, task.render_answer(example)).total == pytest.approx(task.max_reward)
