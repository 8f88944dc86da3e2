"""`AudioQAJsonl`: labelled audio multiple-choice questions listed in a JSON-lines file (R1-AQA /
MMAU layout)."""

from __future__ import annotations

import logging
from pathlib import Path

from datamodules.sources.audio_folder import check_decoding, decode
from datamodules.sources.base import Source
from datamodules.sources.jsonl import inside, json_lines
from datamodules.sources.limits import MAX_LINE_BYTES, check_limit
from datamodules.sources.mcq_benchmark import check_writable
from tasks import AudioQA

log = logging.getLogger(__name__)

AUDIO_KEYS = ("audio", "audio_path", "audio_id", "path")  # where rows of the common layouts name their file


class AudioQAJsonl(Source):
    """One `tasks.AudioQA` per usable line of a JSON-lines file.

    Each line is an object with the audio file (under the first present of ``audio``,
    ``audio_path``, ``audio_id``, ``path``), ``question``, ``choices`` (a list of at least two
    strings) and ``answer`` (one of the choices, or its 0-based index; no choice may hold an
    answer-format tag such as ``</answer>``, which no answer format can carry). Audio paths are
    relative to ``root`` (absolute paths must lie inside it too) and may not leave it. Lines that
    are not valid JSON objects, lack a field, give a bad answer or a path outside ``root`` or to no
    file are skipped when the file is read: counted in ``skipped_rows`` and logged once, with the
    first reasons. Audio that cannot be decoded is skipped at training time, as in `AudioFolder`.

    Args:
        path: The ``.jsonl`` file.
        root: Dataset root the audio paths resolve in; ``None`` means the directory of ``path``.
        sampling_rate: Samples per second of the decoded audio.
        clip_seconds: Longest clip, cut from the middle of longer recordings; ``None`` keeps them
            whole.
        max_line_bytes: Most bytes of one line; a longer one is skipped, never held whole.
    """

    modality = "audio_qa"

    def __init__(
        self,
        path: str,
        root: str | None = None,
        sampling_rate: int = 16000,
        clip_seconds: float | None = 30.0,
        max_line_bytes: int = MAX_LINE_BYTES,
    ):
        check_decoding(sampling_rate, clip_seconds)
        check_limit(max_line_bytes, "max_line_bytes")
        file = Path(path).expanduser()
        if not file.is_file():
            raise FileNotFoundError(f"AudioQAJsonl file {str(file)!r} does not exist")
        self.root = (Path(root).expanduser() if root is not None else file.parent).resolve()
        self.sampling_rate = sampling_rate
        self.clip_seconds = clip_seconds
        self.rows: list[dict] = []
        reasons: list[str] = []
        for number, row in json_lines(file, max_line_bytes):
            try:
                self.rows.append(self._row(row))
            except Exception as err:  # whatever a malformed row raises: skipped and counted, never fatal
                reasons.append(f"{file}:{number}: {str(err)[:200]}")
        self.skipped_rows = len(reasons)
        if reasons:
            log.warning(
                "%s: skipped %d of %d rows, e.g. %s",
                file,
                len(reasons),
                len(reasons) + len(self.rows),
                "; ".join(reasons[:3]),
            )
        if not self.rows:
            raise ValueError(f"no usable rows in {str(file)!r}")

    def _row(self, row: object) -> dict:
        """A checked row ``{"audio": absolute path, "question", "choices", "answer"}``; ValueError
        if unusable."""
        if isinstance(row, dict) and "_error" in row:
            raise ValueError(row["_error"])
        if not isinstance(row, dict):
            raise ValueError("not a JSON object")
        name = next((row[k] for k in AUDIO_KEYS if k in row), None)
        question = row.get("question")
        choices = row.get("choices")
        answer = row.get("answer")
        if not isinstance(name, str) or not isinstance(question, str) or not isinstance(choices, list):
            raise ValueError("needs an audio path, a question and a list of choices")
        if len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise ValueError(f"choices must be at least two strings, got {choices!r}"[:200])
        if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(choices):
            answer = choices[answer]
        if answer not in choices:
            raise ValueError(f"answer {answer!r} is not one of the choices"[:200])
        check_writable(choices)
        audio = inside(self.root, name)  # no escape from the root (.., absolute, symlinks); an existing file
        return {"audio": str(audio), "question": question, "choices": list(choices), "answer": answer}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> AudioQA:
        row = self.rows[index]
        audio = decode(row["audio"], self.sampling_rate, self.clip_seconds)
        return AudioQA(audio=audio, question=row["question"], choices=row["choices"], answer=row["answer"])

    def describe(self, index: int) -> str:
        return self.rows[index]["audio"]
