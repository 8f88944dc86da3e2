"""`MCQBenchmark`: multiple-choice benchmarks (CV-Bench, MMBench, MMAU test-mini) read from their
released files."""

from __future__ import annotations

import io
from typing import Literal

from datamodules.sources import tables
from datamodules.sources.audio_folder import check_decoding
from datamodules.sources.audio_folder import decode as decode_audio
from datamodules.sources.benchmarks import Benchmark
from datamodules.sources.video_folder import check_sampling
from datamodules.sources.video_folder import decode as decode_video
from tasks import Question, answers
from tasks.extras import require


class MCQBenchmark(Benchmark):
    """Multiple-choice questions about images, videos or audio: `tasks.Question` items for
    `tasks.MultipleChoice`, one per usable row, in file order.

    Images are decoded when the file is read (an undecodable one skips its row), audio headers are
    read with soundfile; videos are decoded when used (`VideoFolder` sampling). A row with an option
    holding an answer-format tag (``</answer>``) is skipped: no answer format can carry it.

    Args:
        path: See `Benchmark`.
        question: Column of the question text.
        choices: Column holding the options as a list (CV-Bench, MMAU), or the columns holding one
            option each (MMBench: ``[A, B, C, D]``; empty cells are no option).
        answer: Column of the right answer.
        answer_as: How ``answer`` names the right option: ``"letter"`` (``A``, ``(A)``: CV-Bench,
            MMBench), ``"text"`` (the option itself: MMAU) or ``"index"`` (0-based).
        hint: Column of context shown before the question as ``Hint: ...`` when not empty (MMBench).
        rewrite: Column of an analogical rewording of the question with the same answer
            (`tasks.CoReward` with ``rewrite: item``); None or an empty cell gives none.
        image: Column of the image(s): HF ``Image`` structs, bytes, paths, or base64 strings
            (``image_strings``).
        video: Column of video paths.
        audio: Column of HF ``Audio`` structs, bytes or paths (MMAU: ``audio_id``).
        image_strings: What a string image cell holds: a ``"path"`` or ``"base64"`` bytes (MMBench's
            TSV).
        sampling_rate: Audio samples per second.
        clip_seconds: Longest audio clip (its middle); ``None`` keeps recordings whole.
        num_frames: Frames per video (``None``: by ``fps``).
        fps: Video frames per second when ``num_frames`` is ``None``.
        max_frames: Most frames per video.
        max_pixels: Largest video frame area; ``None`` keeps the stored size.
        **kwargs: ``root``, ``path_format``, ``limit`` and the row limits (``max_image_pixels``,
            ``max_line_bytes``), see `Benchmark`.
    """

    modality = "mcq"

    def __init__(
        self,
        path: str,
        question: str = "question",
        choices: str | list[str] = "choices",
        answer: str = "answer",
        answer_as: Literal["letter", "text", "index"] = "text",
        hint: str | None = None,
        rewrite: str | None = None,
        image: str | None = None,
        video: str | None = None,
        audio: str | None = None,
        image_strings: Literal["path", "base64"] = "path",
        sampling_rate: int = 16000,
        clip_seconds: float | None = 30.0,
        num_frames: int | None = 16,
        fps: float | None = None,
        max_frames: int = 64,
        max_pixels: int | None = 256 * 256,
        **kwargs,
    ):
        if answer_as not in ("letter", "text", "index") or image_strings not in ("path", "base64"):
            raise ValueError(
                f"answer_as must be letter, text or index and image_strings path or base64, got "
                f"{answer_as!r}, {image_strings!r}"
            )
        check_decoding(sampling_rate, clip_seconds)
        self.video_sampling = dict(
            num_frames=num_frames, fps=fps, max_frames=max_frames, max_pixels=max_pixels, trim=0.0
        )
        check_sampling(**self.video_sampling)
        self.columns = dict(
            question=question,
            choices=choices,
            answer=answer,
            hint=hint,
            image=image,
            video=video,
            audio=audio,
            rewrite=rewrite,
        )
        self.answer_as = answer_as
        self.image_strings = image_strings
        self.sampling_rate = sampling_rate
        self.clip_seconds = clip_seconds
        super().__init__(path, **kwargs)

    def parse(self, row: dict, name: str) -> list[dict]:
        columns = self.columns
        question = str(tables.cell(row, columns["question"]))
        if columns["hint"] and not tables.blank(row.get(columns["hint"])):
            question = f"Hint: {row[columns['hint']]}\n{question}"
        choices = self._choices(row)
        truth = self._answer(tables.cell(row, columns["answer"]), choices)
        media = []
        if columns["image"]:
            media += [("image", ref) for ref, _ in self.images(row, columns["image"], name, self.image_strings)]
        if columns["video"]:
            refs = self.media(row, columns["video"])
            if any(isinstance(ref, bytes) for ref in refs):
                raise ValueError("bad video: videos must be files, not bytes")
            media += [("video", ref) for ref in refs]
        if columns["audio"]:
            refs = self.media(row, columns["audio"])
            media += [("audio", _checked_audio(ref)) for ref in refs]
        rewrite = row.get(columns["rewrite"]) if columns["rewrite"] else None
        rewrite = "" if tables.blank(rewrite) else str(rewrite)
        return [
            {
                "name": name,
                "question": question,
                "choices": choices,
                "answer": truth,
                "media": media,
                "rewrite": rewrite,
            }
        ]

    def _choices(self, row: dict) -> list[str]:
        spec = self.columns["choices"]
        if isinstance(spec, str):
            values = tables.cell(row, spec)
            if not isinstance(values, list) or any(tables.blank(v) for v in values):
                raise ValueError(f"bad choices: {spec!r} holds {values!r}, not a list of options"[:200])
        else:
            values = [row.get(column) for column in spec if not tables.blank(row.get(column))]
        choices = [str(v).strip() for v in values]
        if len(choices) < 2 or len(set(choices)) != len(choices):
            raise ValueError(f"bad choices: need >= 2 distinct options, got {choices}"[:200])
        check_writable(choices)
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
        return Question(
            record["question"], list(record["choices"]), record["answer"], media, record["name"], record["rewrite"]
        )

    def _decode(self, kind: str, ref, name: str):
        if kind == "image":
            return self.image(ref, name)
        if kind == "video":
            return decode_video(str(ref), **self.video_sampling, max_image_pixels=self.max_image_pixels)
        label = name if isinstance(ref, bytes) else str(ref)
        return decode_audio(ref, self.sampling_rate, self.clip_seconds, name=label)


def _checked_audio(ref):
    """The audio reference, after reading its header; ValueError when soundfile cannot."""
    soundfile = require("soundfile", "audio", "benchmark audio is read with soundfile")
    try:
        soundfile.info(io.BytesIO(ref) if isinstance(ref, bytes) else str(ref))
    except Exception as err:  # LibsndfileError, RuntimeError, ...: the file is unusable
        raise ValueError(f"undecodable audio: {type(err).__name__}: {str(err)[:200]}") from None
    return ref


def check_writable(choices: list[str]) -> None:
    """ValueError ``unwritable option: ...`` when an option holds an answer-format tag: no answer
    format can carry it (`tasks.answers.format_tag`), so its row could never be answered by text."""
    for choice in choices:
        if tag := answers.format_tag(choice):
            raise ValueError(f"unwritable option: {choice[:80]!r} holds {tag!r}, which no answer format can carry")
