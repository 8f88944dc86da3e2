"""Reading released benchmark files: the rows of parquet (Hugging Face ``datasets``), JSONL, JSON,
TSV/CSV or Charades-STA ``.txt`` files, and the media cells they hold (HF ``Image`` / ``Audio``
structs, raw or base64 bytes, or paths that must stay inside the dataset root)."""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

from PIL import Image

from datamodules.sources.jsonl import episodes, inside, load_rgb
from datamodules.sources.limits import MAX_IMAGE_PIXELS, MAX_LINE_BYTES, bounded_lines
from datamodules.sources.limits import open_image as open_checked
from tasks import SkipItem

SUFFIXES = (".parquet", ".jsonl", ".json", ".tsv", ".csv", ".txt")
_CHARADES_LINE = re.compile(r"\s*(\S+)\s+(\S+)\s+(\S+)\s*##(.*)")
_UNDECODED = re.compile("[\udc80-\udcff]")  # an invalid UTF-8 byte, as errors="surrogateescape" keeps it
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]')  # a whole string, or a bracket or comma outside one


def table_files(path: str, owner: str) -> list[Path]:
    """The files a benchmark ``path`` names: the file itself, or every ``.parquet`` shard under a
    directory (a Hugging Face dataset folder), sorted.

    Raises:
        FileNotFoundError: nothing readable there.
    """
    where = Path(path).expanduser()
    if where.is_dir():
        files = sorted(where.rglob("*.parquet"))
        if files:
            return files
    elif where.is_file() and where.suffix.lower() in SUFFIXES:
        return [where]
    raise FileNotFoundError(
        f"{owner}: {str(where)!r} is neither a {'/'.join(SUFFIXES)} file nor a folder of .parquet files"
    )


def read_rows(files: list[Path], owner: str, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str, object]]:
    """``(row number, file:line, row)`` of every row of ``files`` in order, numbered from 1 across
    files (the line is the row's line in a text file, its position in a JSON list or parquet file);
    a row that cannot be read (not JSON, not UTF-8, a JSONL or ``.txt`` line over
    ``max_line_bytes``, ...) comes as ``{"_error": reason}``, so reading goes on after it."""
    number = 0
    for file in files:
        for line, row in _rows(file, owner, max_line_bytes):
            number += 1
            yield number, f"{file}:{line}", row


def _rows(file: Path, owner: str, max_line_bytes: int) -> Iterator[tuple[int, object]]:
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet  # the eval extra; sources check it with tasks.extras.require first

        batches = pyarrow.parquet.ParquetFile(file).iter_batches(batch_size=64)
        yield from enumerate((row for batch in batches for row in batch.to_pylist()), 1)
    elif suffix == ".jsonl":
        yield from episodes(str(file), owner, max_line_bytes)[1]
    elif suffix == ".json":
        yield from enumerate(json_list(file, owner), 1)
    elif suffix == ".txt":
        yield from (
            (n, _charades(line)) for n, line in _text_lines(file, max_line_bytes) if line is None or line.strip()
        )
    else:
        csv.field_size_limit(2**31 - 1)  # MMBench's TSV holds whole base64 images in one cell
        with open(file, newline="", encoding="utf-8", errors="surrogateescape") as f:
            reader = csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ",")
            for row in reader:
                undecodable = any(isinstance(v, str) and _UNDECODED.search(v) for v in row.values())
                yield reader.line_num, {"_error": "not UTF-8: an invalid byte"} if undecodable else row


def _text_lines(file: Path, max_bytes: int) -> Iterator[tuple[int, str | None]]:
    """``(line number, text)`` of each line, decoded on its own (an invalid byte spoils only its
    line: it is kept as a surrogate escape, which `_charades` refuses); None for a line over
    ``max_bytes``."""
    with open(file, "rb") as f:
        for number, raw in bounded_lines(f, max_bytes):
            text = None if raw is None else raw.decode("utf-8", errors="surrogateescape")
            yield number, None if text is None else text.rstrip("\r\n")


def json_list(file: Path, owner: str) -> list[object]:
    """The rows of a ``.json`` file holding a list; when the whole file does not parse (an invalid
    byte, one row nested past the parser's stack), each element is parsed on its own and a bad one
    comes as ``{"_error": reason}``."""
    text = file.read_bytes().decode("utf-8", errors="surrogateescape")
    try:
        rows = None if _UNDECODED.search(text) else json.loads(text)
    except Exception:  # JSONDecodeError, RecursionError...: find the bad elements
        rows = None
    if rows is None:
        rows = _elements(text, f"{owner}: {str(file)!r}")
    if not isinstance(rows, list):
        raise ValueError(f"{owner}: {str(file)!r} must hold a JSON list of row objects")
    return rows


def _charades(line: str | None) -> dict:
    """A Charades-STA annotation line, ``<video id> <start> <end>##<sentence>``, as a row."""
    if line is None:
        return {"_error": "line too long: over max_line_bytes"}
    if _UNDECODED.search(line):
        return {"_error": "not UTF-8: an invalid byte"}
    match = _CHARADES_LINE.fullmatch(line)
    if not match:
        return {"_error": f"not a Charades-STA line: {line[:80]!r}"}
    return {"video": match[1], "start": match[2], "end": match[3], "query": match[4]}


def _elements(text: str, what: str) -> list[object]:
    """The elements of the JSON list ``text``, each parsed on its own: one that does not parse or
    holds an invalid byte comes as ``{"_error": reason}``."""
    start = len(text) - len(text.lstrip())
    if text[start : start + 1] != "[":
        raise ValueError(f"{what} must hold a JSON list of row objects")
    rows: list[object] = []
    for begin, end in _element_spans(text, start):
        chunk = text[begin:end]
        try:
            if _UNDECODED.search(chunk):
                raise ValueError("an invalid byte")
            rows.append(json.loads(chunk))
        except Exception as err:  # JSONDecodeError, RecursionError, ...: this row only
            rows.append({"_error": f"not JSON: {type(err).__name__}: {str(err)[:200]}"})
    return rows


def _element_spans(text: str, start: int) -> Iterator[tuple[int, int]]:
    """``(begin, end)`` of each element of the JSON list whose ``[`` is at ``start``: split at the
    commas outside strings and brackets (strings are matched whole, so their brackets and commas do
    not count)."""
    depth = 0
    begin = start + 1
    for token in _JSON_TOKENS.finditer(text, start + 1):
        mark = token[0]
        if mark in ("[", "{"):
            depth += 1
        elif mark in ("]", "}") and depth:
            depth -= 1
        elif mark == "]" or (mark == "," and not depth):  # the list's own end, or the end of an element
            if text[begin : token.start()].strip():
                yield begin, token.start()
            if mark == "]":
                return
            begin = token.end()
    if text[begin:].strip():  # an unterminated list: the rest is one (bad) element
        yield begin, len(text)


def blank(value: object) -> bool:
    """An empty cell: None, NaN (pandas' missing value), a blank string, or the string ``nan`` (how
    exports of pandas tables, MMBench's among them, write a missing option or hint)."""
    if isinstance(value, str):
        return value.strip().lower() in ("", "nan")
    return value is None or (isinstance(value, float) and math.isnan(value))


def cell(row: dict, column: str) -> object:
    """The non-empty value of ``column``; ValueError ``missing column: ...`` otherwise."""
    value = row.get(column)
    if blank(value):
        raise ValueError(f"missing column: {column!r} is absent or empty")
    return value


def number(value: object, what: str) -> float:
    """A finite number from a numeric cell (or a numeric string, as TSV and .txt rows hold)."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"bad {what}: {value!r} is not a number") from None
    if isinstance(value, bool) or not math.isfinite(result):
        raise ValueError(f"bad {what}: {value!r} is not a finite number")
    return result


def media_refs(value: object, root: Path, path_format: str = "{}", strings: str = "path") -> list[bytes | Path]:
    """The media of one cell as encoded bytes or a file inside ``root``: an HF ``Image`` / ``Audio``
    struct (``{"bytes", "path"}``, bytes first), raw bytes, a string (a path formatted by
    ``path_format`` and resolved in ``root``, or base64 bytes when ``strings`` is ``"base64"``), or
    a non-empty list of those."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("missing media: the media list is empty")
    return [_ref(v, root, path_format, strings) for v in values]


def _ref(value: object, root: Path, path_format: str, strings: str) -> bytes | Path:
    if isinstance(value, dict):  # an HF Image / Audio feature as stored in parquet
        if value.get("bytes"):
            if not isinstance(value["bytes"], bytes | bytearray):  # bytes(10**13) would allocate 10 TB
                raise ValueError(f"bad bytes: a {type(value['bytes']).__name__}, not bytes")
            return bytes(value["bytes"])
        value = value.get("path")
        strings = "path"
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str) and strings == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error as err:
            raise ValueError(f"bad base64: {err}") from None
    try:
        return inside(root, path_format.format(value) if isinstance(value, str) else value)
    except ValueError as err:
        raise ValueError(f"bad path: {err}") from None


def open_image(ref: bytes | Path, name: str, max_pixels: int = MAX_IMAGE_PIXELS) -> Image.Image:
    """The image of a media reference, decoded in full and as RGB; SkipItem naming ``name`` when it
    cannot be, or (kind ``too_large``, not decoded) when its header shows more than ``max_pixels``
    pixels."""
    if isinstance(ref, Path):
        return load_rgb(ref, max_pixels)
    try:
        with open_checked(io.BytesIO(ref), name, max_pixels) as image:
            image.load()
            return image.convert("RGB")
    except SkipItem:
        raise
    except Exception as err:  # decoders raise OSError, ValueError, SyntaxError...: all mean skip
        raise SkipItem(f"{name}: {type(err).__name__}: {err}") from err
