"""VideoFolder: discovery, frame sampling (count, positions, fps), resizing, and damaged files
skipped."""

import logging
import sys

import numpy as np
import pytest

pytest.importorskip("decord")
av = pytest.importorskip("av")

from datamodules import PretextDataModule, VideoFolder  # noqa: E402
from datamodules.sources.video_folder import decode, sample_indices  # noqa: E402
from tasks import Example, SkipItem, Task, Video  # noqa: E402


class FrameCount(Task):
    """Asks how many frames a video has."""

    name = "frame_count"
    modality = "video"

    def make_example(self, item, rng):
        media = [{"type": "video", "video": item.frames, "fps": item.fps}]
        meta = {"shape": item.frames.shape, "name": item.name, "draw": rng.random()}
        return Example(self.user_message(media, "How many frames?"), str(len(item.frames)), self.name, meta)

    def answer_text(self, example):
        return example.answer

    def score(self, example, answer):
        return {"accuracy": float(answer == example.answer)}


def clip(frames, height=48, width=64):
    """Frames whose red level encodes the frame index (10 + 7 i), over green and blue gradients."""
    y, x = np.mgrid[0:height, 0:width]
    out = np.empty((frames, height, width, 3), np.uint8)
    out[..., 0] = (10 + 7 * np.arange(frames))[:, None, None]
    out[..., 1], out[..., 2] = x * 200 // width, y * 200 // height
    return out


def write(path, frames, fps=10, codec="libx264", options=None, container_options=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", options=container_options or {}) as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.options = options or {}
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path


def frame_index(video):
    """The source frame index of each decoded frame, from its mean red level."""
    return (video.frames[..., 0].mean((1, 2)) - 10) / 7


def assert_frames(video, expected):
    assert len(video.frames) == len(expected)
    np.testing.assert_allclose(frame_index(video), expected, atol=0.45)  # 0.45: the nearest index is the one


@pytest.fixture
def folder(tmp_path):
    write(tmp_path / "a.mp4", clip(30))
    write(tmp_path / "sub" / "B.MP4", clip(12))
    write(tmp_path / "sub" / "deeper" / "c.mkv", clip(20))
    write(tmp_path / "d.avi", clip(16), codec="mpeg4", options={"b": "4M"})  # the default bit rate smears colours
    write(tmp_path / "e.mov", clip(14))
    (tmp_path / "notes.txt").write_text("not a video")
    return tmp_path


def test_finds_videos_recursively_in_sorted_order(folder):
    source = VideoFolder(str(folder))
    names = [p.removeprefix(str(folder) + "/") for p in source.paths]
    assert names == ["a.mp4", "d.avi", "e.mov", "sub/B.MP4", "sub/deeper/c.mkv"]
    assert len(source) == 5 and source.describe(3).endswith("B.MP4")
    assert VideoFolder.modality == "video"


def test_extension_filter_is_case_insensitive(folder):
    source = VideoFolder(str(folder), extensions=(".MKV", "avi"))
    assert [p.rsplit("/", 1)[1] for p in source.paths] == ["d.avi", "c.mkv"]


def test_missing_or_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not an existing directory"):
        VideoFolder(str(tmp_path / "missing"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match="no files ending in"):
        VideoFolder(str(tmp_path))


def test_every_container_decodes_to_the_sampled_frames(folder):
    source = VideoFolder(str(folder), num_frames=4, trim=0.0)
    for index, frames in enumerate([30, 16, 14, 12, 20]):  # a.mp4, d.avi, e.mov, B.MP4, c.mkv
        video = source[index]
        assert isinstance(video, Video) and video.name == source.paths[index]
        assert video.frames.dtype == np.uint8 and video.frames.shape == (4, 48, 64, 3)
        step = frames / 4  # the middles of four equal slices of the whole video
        assert_frames(video, np.floor((np.arange(4) + 0.5) * step))
        assert video.fps == pytest.approx(4 * 10 / frames)


def test_num_frames_samples_the_middles_of_equal_slices_of_the_central_part(tmp_path):
    write(tmp_path / "v.mp4", clip(30))
    # 30 frames at 10 fps, trim 0.05: the central 27 frames from position 1.5, cut into 8 slices of
    # 3.375
    video = VideoFolder(str(tmp_path), num_frames=8)[0]
    assert_frames(video, [3, 6, 9, 13, 16, 20, 23, 26])
    assert video.fps == pytest.approx(8 / 2.7) and video.duration == pytest.approx(2.7)
    odd = VideoFolder(str(tmp_path), num_frames=7)[0]  # rounded up to even: Qwen-VL merges frame pairs
    assert_frames(odd, [3, 6, 9, 13, 16, 20, 23, 26])
    every = VideoFolder(str(tmp_path), num_frames=30)[0]  # more than the central part holds: widened
    assert_frames(every, range(30))
    assert every.fps == pytest.approx(10.0)


def test_trim_leaves_out_both_ends(tmp_path):
    write(tmp_path / "v.mp4", clip(32))
    # trim 0.25 of 32 frames: the central 16 from frame 8, four slices of 4
    video = VideoFolder(str(tmp_path), num_frames=4, trim=0.25)[0]
    assert_frames(video, [10, 14, 18, 22])
    assert video.fps == pytest.approx(4 / 1.6)
    assert_frames(VideoFolder(str(tmp_path), num_frames=4, trim=0.0)[0], [4, 12, 20, 28])


def test_fps_mode_counts_frames_by_duration(tmp_path):
    write(tmp_path / "v.mp4", clip(30))
    sample = lambda **kw: VideoFolder(str(tmp_path), num_frames=None, **kw)[0]
    # 2.7 s of central part at 2 fps is 5.4 frames: rounded down to 4, slices of 6.75 frames from
    # 1.5
    video = sample(fps=2.0)
    assert_frames(video, [4, 11, 18, 25])
    assert video.fps == pytest.approx(4 / 2.7)
    capped = sample(fps=10.0, max_frames=7)  # 27 frames capped at 7, rounded down to 6
    assert_frames(capped, [3, 8, 12, 17, 21, 26])
    assert capped.fps == pytest.approx(6 / 2.7)
    faster = sample(fps=50.0)  # more than the video has: every frame once, at the stored rate
    assert_frames(faster, range(30))
    assert faster.fps == pytest.approx(10.0)
    assert len(sample(fps=0.01).frames) == 2  # never fewer than 2


def test_sample_indices_without_decoding():
    indices, fps = sample_indices(100, 25.0, num_frames=4, trim=0.0)
    assert indices.tolist() == [12, 37, 62, 87] and fps == pytest.approx(1.0)
    indices, fps = sample_indices(3, 30.0, num_frames=None, fps=1.0, trim=0.1)
    # 0.08 frames rounded up to 2; the central 2.4 frames hold them: slices of 1.2 from position 0.3
    assert indices.tolist() == [0, 2] and fps == pytest.approx(25.0)
    with pytest.raises(ValueError, match="fewer than the 16"):
        sample_indices(10, 25.0, num_frames=16)


def test_max_pixels_downsizes_keeping_the_aspect_ratio(tmp_path):
    write(tmp_path / "v.mp4", clip(30))
    small = VideoFolder(str(tmp_path), num_frames=8, max_pixels=1000)[0]
    _, height, width, _ = small.frames.shape
    assert height * width <= 1000 and (height, width) == (27, 36)
    assert_frames(small, [3, 6, 9, 13, 16, 20, 23, 26])  # same frames, smaller
    assert VideoFolder(str(tmp_path), num_frames=8, max_pixels=None)[0].frames.shape == (8, 48, 64, 3)
    assert VideoFolder(str(tmp_path), num_frames=8)[0].frames.shape == (8, 48, 64, 3)  # never enlarged


def test_widths_where_decord_get_batch_fails_still_decode(tmp_path):
    # decord 0.6 get_batch raises for frames 48 pixels wide, and single frames come back mis-shaped
    source = clip(12, height=40, width=48)
    write(tmp_path / "narrow.mp4", source)
    video = decode(str(tmp_path / "narrow.mp4"), num_frames=4, trim=0.0)
    assert video.frames.shape == (4, 40, 48, 3)
    assert_frames(video, [1, 4, 7, 10])
    assert np.abs(video.frames.astype(int) - source[[1, 4, 7, 10]]).mean() < 3  # rows not scrambled


def test_sampling_options_are_checked():
    with pytest.raises(ValueError, match="exactly one of num_frames and fps"):
        VideoFolder(".", num_frames=8, fps=2.0)
    with pytest.raises(ValueError, match="exactly one of num_frames and fps"):
        VideoFolder(".", num_frames=None)
    for bad in (dict(trim=0.5), dict(max_frames=1), dict(max_pixels=0), dict(num_frames=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            VideoFolder(".", **bad)


def truncated(path, faststart=False):
    """A real mp4 cut to its first 40% of bytes (index at the end: lost; at the start: data
    missing)."""
    write(
        path,
        clip(30) + np.random.default_rng(0).integers(0, 20, (30, 48, 64, 3), dtype=np.uint8),
        container_options={"movflags": "faststart"} if faststart else None,
    )
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 5])
    return path


def broken_files(folder):
    (folder / "garbage.mp4").write_bytes(np.random.default_rng(0).bytes(5000))
    (folder / "empty.mkv").write_bytes(b"")
    truncated(folder / "cut.mp4")
    truncated(folder / "cut_faststart.mp4", faststart=True)
    write(folder / "one_frame.mp4", clip(1))
    return ["cut.mp4", "cut_faststart.mp4", "empty.mkv", "garbage.mp4", "one_frame.mp4"]


def test_undecodable_files_raise_skip_item_with_the_path(tmp_path):
    names = broken_files(tmp_path)
    source = VideoFolder(str(tmp_path), num_frames=None, fps=2.0)
    assert [p.rsplit("/", 1)[1] for p in source.paths] == names
    for index in range(len(names)):
        with pytest.raises(SkipItem, match=source.describe(index)):
            source[index]


def test_damaged_files_give_a_video_or_a_skip_never_a_crash(tmp_path):
    rng = np.random.default_rng(1)
    noisy = clip(30) + rng.integers(0, 30, (30, 48, 64, 3), dtype=np.uint8)
    originals = [
        write(tmp_path / "fast.mp4", noisy, container_options={"movflags": "faststart"}),
        write(tmp_path / "v.mkv", noisy),
    ]
    outcomes = []
    for original in originals:
        data = original.read_bytes()
        for k in range(8):
            damaged = bytearray(data[: len(data) * (k + 2) // 10] if k % 2 else data)
            for position in rng.integers(len(damaged) // 4, len(damaged), 20 * (k % 2 == 0)):
                damaged[position] = rng.integers(256)
            path = tmp_path / f"damaged{k}{original.suffix}"
            path.write_bytes(bytes(damaged))
            try:
                video = decode(str(path), num_frames=4)
                assert video.frames.shape == (4, 48, 64, 3) and video.fps > 0
                outcomes.append("video")
            except SkipItem as err:
                assert str(path) in str(err)
                outcomes.append("skip")
    assert "skip" in outcomes


def test_missing_decord_names_the_extra(tmp_path, monkeypatch):
    write(tmp_path / "v.mp4", clip(4))
    monkeypatch.setitem(sys.modules, "decord", None)
    with pytest.raises(ImportError, match=r"zoo\[video\]"):
        decode(str(tmp_path / "v.mp4"))


def test_data_module_skips_corrupt_and_truncated_videos(tmp_path, caplog):
    for i, frames in enumerate([10, 12, 14, 16, 18, 20, 22]):  # 7 good + 5 bad: 3 batches of 4
        write(tmp_path / f"good{i}.mp4", clip(frames))
    bad = broken_files(tmp_path)
    source = VideoFolder(str(tmp_path), num_frames=None, fps=5.0, max_frames=8)
    dm = PretextDataModule(source, FrameCount(), batch_size=4, val_size=0)
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        epochs = [list(dm.train_dataloader()) for _ in range(2)]
    for batches in epochs:
        assert len(batches) == 3 and all(len(b) == 4 for b in batches)
        examples = [e for b in batches for e in b]
        assert all(e.meta["name"].rsplit("/", 1)[1].startswith("good") for e in examples)
        assert {e.answer for e in examples} <= {"4", "6", "8"}  # 0.9 s-1.8 s at 5 fps, at most 8
    assert dm.skipped >= 2 * len(bad)  # every position is visited each epoch: each bad file is met
    for name in bad:
        assert sum(name in r.getMessage() for r in caplog.records) == 1


def test_min_seconds_skips_short_videos_and_counts_them_apart(tmp_path):
    # 10 fps: 12 frames = 1.2 s, 20 frames = 2.0 s, 30 frames = 3.0 s
    for name, frames in [("a_short", 12), ("b_edge", 20), ("c_long", 30)]:
        write(tmp_path / f"{name}.mp4", clip(frames))
    write(tmp_path / "d_broken.mp4", clip(10))
    (tmp_path / "d_broken.mp4").write_bytes(b"not a video")
    source = VideoFolder(str(tmp_path), num_frames=4, min_seconds=2.0)
    with pytest.raises(SkipItem, match=r"1\.2 s long, under min_seconds=2\.0") as short:
        source[0]
    assert short.value.kind == "too_short"
    assert len(source[1].frames) == 4 and len(source[2].frames) == 4  # exactly 2 s is kept
    with pytest.raises(SkipItem) as broken:
        source[3]
    assert broken.value.kind is None
    dm = PretextDataModule(source, FrameCount(), batch_size=2, val_size=0)
    examples = [e for batch in dm.train_dataloader() for e in batch]
    assert examples and not any(e.meta["name"].endswith("a_short.mp4") for e in examples)
    counts = dm.skip_counts
    assert counts[("VideoFolder", "too_short")] >= 1 and counts[("VideoFolder", "unreadable")] >= 1
    assert set(counts) == {("VideoFolder", "too_short"), ("VideoFolder", "unreadable")}
    with pytest.raises(ValueError, match="min_seconds"):
        VideoFolder(str(tmp_path), min_seconds=-1.0)


def test_frames_over_max_image_pixels_skip_the_video_before_decoding(tmp_path, monkeypatch):
    write(tmp_path / "v.mp4", clip(12))  # 48 x 64 = 3072 pixels a frame
    assert VideoFolder(str(tmp_path), num_frames=4, max_image_pixels=3072)[0].frames.shape == (4, 48, 64, 3)
    decord = pytest.importorskip("decord")
    opened = []
    monkeypatch.setattr(decord, "VideoReader", lambda *a, **k: opened.append(a))
    with pytest.raises(SkipItem, match=r"frames of 64x48 pixels, over max_image_pixels=3071") as large:
        VideoFolder(str(tmp_path), num_frames=4, max_image_pixels=3071)[0]
    assert large.value.kind == "too_large" and not opened  # refused from the header, nothing decoded
    with pytest.raises(ValueError, match="max_image_pixels must be a positive integer"):
        VideoFolder(str(tmp_path), max_image_pixels=0)


@pytest.mark.parametrize(
    "frames, rate, ask",
    [
        (30, 10, {"nframes": 8}),
        (30, 10, {"nframes": 7}),  # rounded to the nearest even count: 8
        (30, 10, {"nframes": 5}),  # 2.5 rounds half to even: 4
        (30, 10, {"fps": 2.0}),
        (30, 10, {"fps": 1.0}),  # 3 frames is under its minimum of 4
        (30, 10, {"fps": 7.0}),
        (36, 12, {"fps": 5.0}),
    ],
)
def test_qwen_frame_selection_picks_the_frames_qwen_vl_utils_picks(frames, rate, ask, tmp_path, monkeypatch):
    vision = pytest.importorskip("qwen_vl_utils.vision_process")
    monkeypatch.setattr(vision, "FORCE_QWENVL_VIDEO_READER", "decord")
    path = write(tmp_path / "v.mp4", clip(frames), fps=rate)
    (_, meta), qwen_fps = vision.fetch_video(
        {"video": str(path), **ask, **({"max_frames": 64} if "fps" in ask else {})},
        return_video_sample_fps=True,
        return_video_metadata=True,
    )
    sampling = dict(num_frames=ask.get("nframes"), fps=ask.get("fps"), max_frames=64, trim=0.0)
    video = decode(str(path), **sampling, max_pixels=None, frame_selection="qwen")
    assert_frames(video, meta["frames_indices"])
    indices, fps = sample_indices(frames, rate, **sampling, frame_selection="qwen")
    assert indices.tolist() == list(meta["frames_indices"])
    assert video.fps == pytest.approx(qwen_fps) and fps == pytest.approx(qwen_fps)
