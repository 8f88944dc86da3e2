"""`MomentBenchmark`: temporal-grounding benchmarks (Charades-STA) read from their released
files."""

from __future__ import annotations

from datamodules.sources import tables
from datamodules.sources.benchmarks import Benchmark
from datamodules.sources.video_folder import check_sampling
from datamodules.sources.video_folder import decode as decode_video
from tasks import Moments
from tasks.extras import require


class MomentBenchmark(Benchmark):
    """Sentences with the moment of a video each describes (Charades-STA, also its original ``.txt``
    annotations): `tasks.Moments` items for `tasks.TemporalGrounding`, one per row.

    Times are in seconds, rounded to 0.01; a moment must start before it ends, and before
    ``duration`` when that column is given (its end is then clipped to the duration). Videos are
    decoded when used, sampled over their whole length (no trim), so frame ``t`` is at ``t / fps``
    seconds.

    Args:
        path: See `Benchmark`.
        video: Column of the video path (or id, with ``path_format``).
        query: Column of the sentence.
        start: Column of the start time.
        end: Column of the end time.
        timestamps: Column holding ``[start, end]`` instead of ``start`` and ``end``.
        duration: Column of the video's length in seconds, when the file has one.
        num_frames: Frames per video (``None``: by ``fps``).
        fps: Frames per second of video when ``num_frames`` is ``None``.
        max_frames: Most frames per video.
        max_pixels: Largest frame area; ``None`` keeps the stored size.
        **kwargs: ``root``, ``path_format`` (``"Charades_v1_480/{}.mp4"`` for bare ids),
            ``limit`` and ``max_line_bytes``, see `Benchmark`.
    """

    modality = "moments"

    def __init__(
        self,
        path: str,
        video: str = "video",
        query: str = "query",
        start: str = "start",
        end: str = "end",
        timestamps: str | None = None,
        duration: str | None = "duration",
        num_frames: int | None = None,
        fps: float | None = 1.0,
        max_frames: int = 64,
        max_pixels: int | None = 256 * 256,
        **kwargs,
    ):
        self.sampling = dict(num_frames=num_frames, fps=fps, max_frames=max_frames, max_pixels=max_pixels, trim=0.0)
        check_sampling(**self.sampling)
        require("decord", "video", "MomentBenchmark decodes videos with decord")  # before reading the file
        self.columns = dict(video=video, query=query, start=start, end=end, timestamps=timestamps, duration=duration)
        super().__init__(path, **kwargs)

    def parse(self, row: dict, name: str) -> list[dict]:
        columns = self.columns
        refs = self.media(row, columns["video"])
        if len(refs) != 1 or isinstance(refs[0], bytes):
            raise ValueError("bad video: need one video file per row")
        query = tables.cell(row, columns["query"])
        if columns["timestamps"]:
            pair = tables.cell(row, columns["timestamps"])
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError(f"bad interval: {pair!r} is not [start, end]"[:200])
        else:
            pair = [tables.cell(row, columns["start"]), tables.cell(row, columns["end"])]
        start, end = (round(tables.number(v, "interval"), 2) for v in pair)
        if columns["duration"] and not tables.blank(row.get(columns["duration"])):
            end = min(end, tables.number(row[columns["duration"]], "duration"))
        if not 0 <= start < end:
            raise ValueError(f"bad interval: [{start}, {end}] (within the duration) is empty or negative")
        return [{"name": name, "video": str(refs[0]), "query": str(query), "interval": [start, end]}]

    def __getitem__(self, index: int) -> Moments:
        record = self.records[index]
        video = decode_video(record["video"], **self.sampling)
        return Moments(video, [(record["query"], list(record["interval"]))], record["name"])
