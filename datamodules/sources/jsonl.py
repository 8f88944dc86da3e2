"""Reading JSONL files whose media paths must stay inside a dataset root (shared by the GUI,
frame-pair and audio QA sources)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from PIL import Image

from datamodules.sources.limits import MAX_IMAGE_PIXELS, MAX_LINE_BYTES, bounded_lines, open_image
from tasks import SkipItem

log = logging.getLogger(__name__)


def episodes(path: str, owner: str, max_line_bytes: int = MAX_LINE_BYTES) -> tuple[Path, Iterator[tuple[int, dict]]]:
    """The dataset root (the folder holding ``path``) and the ``(line number, object)`` of each
    non-blank line (see `json_lines`).

    Raises:
        FileNotFoundError: ``path`` is not a file.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"{owner}: {str(file)!r} is not a JSONL file")
    return file.parent.resolve(), json_lines(file, max_line_bytes)


def json_lines(file: Path, max_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, object]]:
    """The ``(line number, value)`` of each non-blank line; a line that is not UTF-8 JSON (an
    invalid byte, nesting deeper than the parser's stack, ...) or is longer than ``max_bytes``
    (never read whole) comes as ``{"_error": reason}``, so one bad line never stops the file."""
    with open(file, "rb") as f:
        for number, raw in bounded_lines(f, max_bytes):
            if raw is None:
                yield number, {"_error": f"line too long: over max_line_bytes={max_bytes} bytes"}
                continue
            try:
                line = raw.decode("utf-8")
                if line.strip():
                    yield number, json.loads(line)
            except Exception as err:  # UnicodeDecodeError, JSONDecodeError, RecursionError, MemoryError...
                yield number, {"_error": f"not JSON: {type(err).__name__}: {str(err)[:200]}"}


def inside(root: Path, relative: object) -> Path:
    """``relative`` resolved under ``root``; ValueError for a non-string, or a path (absolute,
    ``..``, or a symlink) that leads outside the root, or to no file."""
    if not isinstance(relative, str) or not relative:
        raise ValueError(f"a media path must be a non-empty string, got {relative!r}")
    resolved = (root / relative).resolve()
    if not resolved.is_relative_to(root):
        raise ValueError(f"{relative!r} leads outside the dataset root {str(root)!r}")
    if not resolved.is_file():
        raise ValueError(f"{relative!r}: no such file under {str(root)!r}")
    return resolved


def load_rgb(path: Path, max_pixels: int = MAX_IMAGE_PIXELS) -> Image.Image:
    """The image at ``path``, decoded in full and as RGB; SkipItem when it cannot be read, or (kind
    ``too_large``, not decoded) when its header shows more than ``max_pixels`` pixels."""
    try:
        with open_image(path, path, max_pixels) as image:
            image.load()
            return image.convert("RGB")
    except SkipItem:
        raise
    except Exception as err:  # decoders raise OSError, ValueError, SyntaxError...: all mean skip
        raise SkipItem(f"{path}: {type(err).__name__}: {err}") from err


class RowSkips:
    """Counts the rows of an episode file that cannot be used, by reason, and logs them once (a
    summary)."""

    def __init__(self, owner: str, path: str):
        self.owner = owner
        self.path = path
        self.reasons = Counter()
        self.first = {}

    def add(self, line: int | str, reason: str) -> None:
        """Count a skipped row: ``line`` is its line number in the file, or a ``file:line`` of its
        own."""
        kind = reason.split(":")[0]
        self.reasons[kind] += 1
        self.first.setdefault(kind, f"{line if isinstance(line, str) else f'{self.path}:{line}'}: {reason}")

    @property
    def count(self) -> int:
        return sum(self.reasons.values())

    def report(self) -> None:
        if self.count:
            examples = "; ".join(self.first.values())
            log.warning(
                "%s skipped %d unusable row(s) of %s (first of each kind: %s)",
                self.owner,
                self.count,
                self.path,
                examples,
            )
