"""Labelled benchmarks read from their released files: multiple choice (CV-Bench, MMBench, MMAU), referring
grounding (RefCOCO) and temporal grounding (Charades-STA), each row checked when the file is read.

Column names are arguments, so one class reads every layout of its kind; configs/eval/*.yaml set them per
benchmark. See `tables` for the file formats and media cells.
"""

from __future__ import annotations

import io
from abc import abstractmethod
from pathlib import Path
from typing import Literal

from datamodules.sources import tables
from datamodules.sources.audio_folder import check_decoding
from datamodules.sources.audio_folder import decode as decode_audio
from datamodules.sources.base import Source
from datamodules.sources.jsonl import RowSkips
from datamodules.sources.video_folder import check_sampling
from datamodules.sources.video_folder import decode as decode_video
from tasks import Moments, Question, Referring, SkipItem, answers
from tasks.extras import require

_BOX_SLACK = 1.0  # pixels a box may overhang the image (float rounding in released boxes); clipped


class Benchmark(Source):
    """Rows of a released benchmark file, each checked when the file is read and turned into zero or more
    records; a bad row (missing column, undecodable image, answer not among the options, box outside the image,
    media path leaving ``root``, ...) is skipped, counted in ``skipped_rows`` (by kind in ``skip_reasons``) and
    logged once with the first example of each kind.

    Args:
        path: A ``.parquet``, ``.jsonl``, ``.json`` (a list of objects), ``.tsv`` / ``.csv`` or Charades-STA
            ``.txt`` file, or a folder of ``.parquet`` shards (a Hugging Face dataset download).
        root: Folder that media paths in the rows are relative to (and may not leave); ``None`` means the folder
            holding ``path`` (``path`` itself when it is a folder).
        limit: Keep only the first this many usable items (a quick look at a large benchmark).
    """

    def __init__(self, path: str, root: str | None = None, limit: int | None = None):
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be >= 1 or None, got {limit}")
        owner = type(self).__name__
        files = tables.table_files(path, owner)
        if any(file.suffix == ".parquet" for file in files):
            require("pyarrow.parquet", "eval", f"{owner} reads parquet files with pyarrow")  # before any work
        where = Path(path).expanduser()
        self.root = Path(root).expanduser().resolve() if root is not None else \
            (where if where.is_dir() else where.parent).resolve()
        skips = RowSkips(owner, str(where))
        self.records: list[dict] = []
        for number, row in tables.read_rows(files, owner):
            if limit is not None and len(self.records) >= limit:
                break
            try:
                if not isinstance(row, dict) or "_error" in row:
                    raise ValueError(row.get("_error", "not an object") if isinstance(row, dict) else "not an object")
                self.records.extend(self.parse(row, f"{where.name}[{number}]"))
            except (ValueError, SkipItem) as err:
                skips.add(number, str(err))
        if limit is not None:
            del self.records[limit:]  # a row of several sentences may pass the limit
        skips.report()
        self.skipped_rows, self.skip_reasons = skips.count, dict(skips.reasons)
        if not self.records:
            raise ValueError(f"{owner}: no usable rows in {str(where)!r}")

    @abstractmethod
    def parse(self, row: dict, name: str) -> list[dict]:
        """Check one row and return its records (what `__getitem__` needs); ValueError ``kind: detail`` or
        `tasks.SkipItem` when the row cannot be used."""

    def __len__(self) -> int:
        return len(self.records)

    def describe(self, index: int) -> str:
        return self.records[index]["name"]

    def images(self, row: dict, column: str, name: str, path_format: str = "{}", strings: str = "path") -> list:
        """The image references of a row's cell, each checked by decoding it; ValueError if one cannot be."""
        refs = tables.media_refs(tables.cell(row, column), self.root, path_format, strings)
        sizes = []
        for ref in refs:
            try:
                sizes.append(tables.open_image(ref, name).size)
            except SkipItem as err:
                raise ValueError(f"undecodable image: {err}") from None
        return list(zip(refs, sizes, strict=True))


class MCQBenchmark(Benchmark):
    """Multiple-choice questions about images, videos or audio: `tasks.Question` items for
    `tasks.MultipleChoice`, one per usable row, in file order.

    Images are decoded when the file is read (an undecodable one skips its row), audio headers are read with
    soundfile; videos are decoded when used (`VideoFolder` sampling).

    Args:
        path: See `Benchmark`.
        question: Column of the question text.
        choices: Column holding the options as a list (CV-Bench, MMAU), or the columns holding one option each
            (MMBench: ``[A, B, C, D]``; empty cells are no option).
        answer: Column of the right answer.
        answer_as: How ``answer`` names the right option: ``"letter"`` (``A``, ``(A)``: CV-Bench, MMBench),
            ``"text"`` (the option itself: MMAU) or ``"index"`` (0-based).
        hint: Column of context shown before the question as ``Hint: ...`` when not empty (MMBench).
        image: Column of the image(s): HF ``Image`` structs, bytes, paths, or base64 strings (``image_strings``).
        video: Column of video paths.
        audio: Column of HF ``Audio`` structs, bytes or paths (MMAU: ``audio_id``).
        image_strings: What a string image cell holds: a ``"path"`` or ``"base64"`` bytes (MMBench's TSV).
        path_format: Turns a path cell into a path under ``root``, e.g. ``"videos/{}.mp4"`` for bare ids.
        sampling_rate: Audio samples per second.
        clip_seconds: Longest audio clip (its middle); ``None`` keeps recordings whole.
        num_frames: Frames per video (``None``: by ``fps``).
        fps: Video frames per second when ``num_frames`` is ``None``.
        max_frames: Most frames per video.
        max_pixels: Largest video frame area; ``None`` keeps the stored size.
        **kwargs: ``root`` and ``limit``, see `Benchmark`.
    """

    modality = "mcq"

    def __init__(self, path: str, question: str = "question", choices: str | list[str] = "choices",
                 answer: str = "answer", answer_as: Literal["letter", "text", "index"] = "text",
                 hint: str | None = None, image: str | None = None, video: str | None = None,
                 audio: str | None = None, image_strings: Literal["path", "base64"] = "path",
                 path_format: str = "{}", sampling_rate: int = 16000, clip_seconds: float | None = 30.0,
                 num_frames: int | None = 16, fps: float | None = None, max_frames: int = 64,
                 max_pixels: int | None = 256 * 256, **kwargs):
        if answer_as not in ("letter", "text", "index") or image_strings not in ("path", "base64"):
            raise ValueError(f"answer_as must be letter, text or index and image_strings path or base64, got "
                             f"{answer_as!r}, {image_strings!r}")
        check_decoding(sampling_rate, clip_seconds)
        self.video_sampling = dict(num_frames=num_frames, fps=fps, max_frames=max_frames, max_pixels=max_pixels,
                                   trim=0.0)
        check_sampling(**self.video_sampling)
        self.columns = dict(question=question, choices=choices, answer=answer, hint=hint, image=image, video=video,
                            audio=audio)
        self.answer_as, self.image_strings, self.path_format = answer_as, image_strings, path_format
        self.sampling_rate, self.clip_seconds = sampling_rate, clip_seconds
        super().__init__(path, **kwargs)

    def parse(self, row: dict, name: str) -> list[dict]:
        columns = self.columns
        question = str(tables.cell(row, columns["question"]))
        if columns["hint"] and not tables.blank(row.get(columns["hint"])):
            question = f"Hint: {row[columns['hint']]}\n{question}"
        choices = self._choices(row)
        truth = self._answer(tables.cell(row, columns["answer"]), choices)
        media = [("image", ref) for ref, _ in self.images(row, columns["image"], name, self.path_format,
                                                          self.image_strings)] if columns["image"] else []
        if columns["video"]:
            refs = tables.media_refs(tables.cell(row, columns["video"]), self.root, self.path_format)
            if any(isinstance(ref, bytes) for ref in refs):
                raise ValueError("bad video: videos must be files, not bytes")
            media += [("video", ref) for ref in refs]
        if columns["audio"]:
            refs = tables.media_refs(tables.cell(row, columns["audio"]), self.root, self.path_format)
            media += [("audio", _checked_audio(ref)) for ref in refs]
        return [{"name": name, "question": question, "choices": choices, "answer": truth, "media": media}]

    def _choices(self, row: dict) -> list[str]:
        spec = self.columns["choices"]
        if isinstance(spec, str):
            values = tables.cell(row, spec)
            if not isinstance(values, list):
                raise ValueError(f"bad choices: {spec!r} holds {type(values).__name__}, not a list")
        else:
            values = [row.get(column) for column in spec if not tables.blank(row.get(column))]
        choices = [str(v).strip() for v in values]
        if len(choices) < 2 or len(set(choices)) != len(choices):
            raise ValueError(f"bad choices: need >= 2 distinct options, got {choices}"[:200])
        return choices

    def _answer(self, value: object, choices: list[str]) -> str:
        if self.answer_as == "letter":
            chosen = answers.parse_letter(str(value), choices)
        elif self.answer_as == "index":
            index = tables.number(value, "answer index")
            chosen = choices[int(index)] if index.is_integer() and 0 <= index < len(choices) else None
        else:
            chosen = str(value).strip() if str(value).strip() in choices else None
        if chosen is None:
            raise ValueError(f"answer not an option: {value!r} among {choices}"[:200])
        return chosen

    def __getitem__(self, index: int) -> Question:
        record = self.records[index]
        media = [self._decode(kind, ref, record["name"]) for kind, ref in record["media"]]
        return Question(record["question"], list(record["choices"]), record["answer"], media, record["name"])

    def _decode(self, kind: str, ref, name: str):
        if kind == "image":
            return tables.open_image(ref, name)
        if kind == "video":
            return decode_video(str(ref), **self.video_sampling)
        return decode_audio(ref, self.sampling_rate, self.clip_seconds, name=f"{name} ({str(ref)[:100]})")


def _checked_audio(ref):
    """The audio reference, after reading its header; ValueError when soundfile cannot."""
    soundfile = require("soundfile", "audio", "benchmark audio is read with soundfile")
    try:
        soundfile.info(io.BytesIO(ref) if isinstance(ref, bytes) else str(ref))
    except Exception as err:  # LibsndfileError, RuntimeError, ...: the file is unusable
        raise ValueError(f"undecodable audio: {type(err).__name__}: {str(err)[:200]}") from None
    return ref


class GroundingBenchmark(Benchmark):
    """Referring expressions with their boxes (RefCOCO, RefCOCO+, RefCOCOg): `tasks.Referring` items for
    `tasks.ReferringGrounding`, one per expression (a row listing several sentences gives one item each).

    Boxes must lie inside the image (an overhang of up to 1 pixel is clipped) and have a positive area; the
    image is decoded when the file is read to check both.

    Args:
        path: See `Benchmark`.
        box_format: How ``bbox`` is written, in pixels: ``"xywh"`` (left, top, width, height: COCO, RefCOCO) or
            ``"xyxy"`` (left, top, right, bottom). No default: a wrong guess halves every IoU silently.
        image: Column of the image (HF ``Image`` struct, bytes or path).
        expressions: Column of the referring expression: a string, or a list of strings (several sentences
            for one object).
        bbox: Column of the box.
        path_format: Turns a path cell into a path under ``root``, e.g. ``"train2014/{}"``.
        **kwargs: ``root`` and ``limit``, see `Benchmark`.
    """

    modality = "referring"

    def __init__(self, path: str, box_format: Literal["xywh", "xyxy"], image: str = "image",
                 expressions: str = "expression", bbox: str = "bbox", path_format: str = "{}", **kwargs):
        if box_format not in ("xywh", "xyxy"):
            raise ValueError(f"box_format must be 'xywh' or 'xyxy', got {box_format!r}")
        self.box_format, self.path_format = box_format, path_format
        self.columns = dict(image=image, expressions=expressions, bbox=bbox)
        super().__init__(path, **kwargs)

    def parse(self, row: dict, name: str) -> list[dict]:
        value = tables.cell(row, self.columns["bbox"])
        if not isinstance(value, list) or len(value) != 4:
            raise ValueError(f"bad box: {value!r} is not four numbers"[:200])
        x, y, a, b = (tables.number(v, "box") for v in value)
        box = [x, y, x + a, y + b] if self.box_format == "xywh" else [x, y, a, b]
        ((ref, (width, height)),) = self.images(row, self.columns["image"], name, self.path_format)
        if min(box) < -_BOX_SLACK or box[2] > width + _BOX_SLACK or box[3] > height + _BOX_SLACK:
            raise ValueError(f"box outside the image: {box} in {width} x {height}")
        box = [min(max(v, 0.0), limit) for v, limit in zip(box, (width, height, width, height), strict=True)]
        if box[0] >= box[2] or box[1] >= box[3]:
            raise ValueError(f"bad box: {box} has no area")
        sentences = tables.cell(row, self.columns["expressions"])
        sentences = [s for s in (sentences if isinstance(sentences, list) else [sentences])
                     if isinstance(s, str) and s.strip()]
        if not sentences:
            raise ValueError("missing column: no referring expression")
        return [{"name": f"{name}#{i}", "image": ref, "expression": s, "box": box} for i, s in enumerate(sentences)]

    def __getitem__(self, index: int) -> Referring:
        record = self.records[index]
        image = tables.open_image(record["image"], record["name"])
        return Referring(image, [(record["expression"], list(record["box"]))], record["name"])


class MomentBenchmark(Benchmark):
    """Sentences with the moment of a video each describes (Charades-STA, also its original ``.txt``
    annotations): `tasks.Moments` items for `tasks.TemporalGrounding`, one per row.

    Times are in seconds, rounded to 0.01; a moment must start before it ends, and before ``duration`` when
    that column is given (its end is then clipped to the duration). Videos are decoded when used, sampled over
    their whole length (no trim), so frame ``t`` is at ``t / fps`` seconds.

    Args:
        path: See `Benchmark`.
        video: Column of the video path (or id, with ``path_format``).
        query: Column of the sentence.
        start: Column of the start time.
        end: Column of the end time.
        timestamps: Column holding ``[start, end]`` instead of ``start`` and ``end``.
        duration: Column of the video's length in seconds, when the file has one.
        path_format: Turns a video cell into a path under ``root``, e.g. ``"Charades_v1_480/{}.mp4"``.
        num_frames: Frames per video (``None``: by ``fps``).
        fps: Frames per second of video when ``num_frames`` is ``None``.
        max_frames: Most frames per video.
        max_pixels: Largest frame area; ``None`` keeps the stored size.
        **kwargs: ``root`` and ``limit``, see `Benchmark`.
    """

    modality = "moments"

    def __init__(self, path: str, video: str = "video", query: str = "query", start: str = "start",
                 end: str = "end", timestamps: str | None = None, duration: str | None = "duration",
                 path_format: str = "{}", num_frames: int | None = None, fps: float | None = 1.0,
                 max_frames: int = 64, max_pixels: int | None = 256 * 256, **kwargs):
        self.sampling = dict(num_frames=num_frames, fps=fps, max_frames=max_frames, max_pixels=max_pixels,
                             trim=0.0)
        check_sampling(**self.sampling)
        self.columns = dict(video=video, query=query, start=start, end=end, timestamps=timestamps,
                            duration=duration)
        self.path_format = path_format
        super().__init__(path, **kwargs)

    def parse(self, row: dict, name: str) -> list[dict]:
        columns = self.columns
        refs = tables.media_refs(tables.cell(row, columns["video"]), self.root, self.path_format)
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
