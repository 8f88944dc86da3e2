"""Reading released benchmark files: the rows of parquet (Hugging Face ``datasets``), JSONL, JSON, TSV/CSV or
Charades-STA ``.txt`` files, and the media cells they hold (HF ``Image`` / ``Audio`` structs, raw or base64
bytes, or paths that must stay inside the dataset root)."""

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
from tasks import SkipItem

SUFFIXES = (".parquet", ".jsonl", ".json", ".tsv", ".csv", ".txt")
_CHARADES_LINE = re.compile(r"\s*(\S+)\s+(\S+)\s+(\S+)\s*##(.*)")


def table_files(path: str, owner: str) -> list[Path]:
    """The files a benchmark ``path`` names: the file itself, or every ``.parquet`` shard under a directory (a
    Hugging Face dataset folder), sorted.

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
    raise FileNotFoundError(f"{owner}: {str(where)!r} is neither a {'/'.join(SUFFIXES)} file nor a folder of "
                            ".parquet files")


def read_rows(files: list[Path], owner: str) -> Iterator[tuple[int, object]]:
    """``(row number, row)`` of every row of ``files`` in order, numbered from 1 across files; a row that
    cannot be parsed comes as ``{"_error": reason}``."""
    number = 0
    for file in files:
        for row in _rows(file, owner):
            number += 1
            yield number, row


def _rows(file: Path, owner: str) -> Iterator[object]:
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet  # the eval extra; sources check it with tasks.extras.require first

        for batch in pyarrow.parquet.ParquetFile(file).iter_batches(batch_size=64):
            yield from batch.to_pylist()
    elif suffix == ".jsonl":
        yield from (row for _, row in episodes(str(file), owner)[1])
    elif suffix == ".json":
        rows = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise ValueError(f"{owner}: {str(file)!r} must hold a JSON list of row objects")
        yield from rows
    elif suffix == ".txt":
        yield from (_charades(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip())
    else:
        csv.field_size_limit(2**31 - 1)  # MMBench's TSV holds whole base64 images in one cell
        with open(file, newline="", encoding="utf-8") as f:
            yield from csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ",")


def _charades(line: str) -> dict:
    """A Charades-STA annotation line, ``<video id> <start> <end>##<sentence>``, as a row."""
    match = _CHARADES_LINE.fullmatch(line)
    if not match:
        return {"_error": f"not a Charades-STA line: {line[:80]!r}"}
    return {"video": match[1], "start": match[2], "end": match[3], "query": match[4]}


def blank(value: object) -> bool:
    """An empty cell: None, NaN (pandas' missing value), a blank string, or the string ``nan`` (how exports of
    pandas tables, MMBench's among them, write a missing option or hint)."""
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
    """The media of one cell as encoded bytes or a file inside ``root``: an HF ``Image`` / ``Audio`` struct
    (``{"bytes", "path"}``, bytes first), raw bytes, a string (a path formatted by ``path_format`` and resolved
    in ``root``, or base64 bytes when ``strings`` is ``"base64"``), or a non-empty list of those."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("missing media: the media list is empty")
    return [_ref(v, root, path_format, strings) for v in values]


def _ref(value: object, root: Path, path_format: str, strings: str) -> bytes | Path:
    if isinstance(value, dict):  # an HF Image / Audio feature as stored in parquet
        if value.get("bytes"):
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


def open_image(ref: bytes | Path, name: str) -> Image.Image:
    """The image of a media reference, decoded in full and as RGB; SkipItem naming ``name`` when it cannot be."""
    if isinstance(ref, Path):
        return load_rgb(ref)
    try:
        with Image.open(io.BytesIO(ref)) as image:
            image.load()
            return image.convert("RGB")
    except Exception as err:  # decoders raise OSError, ValueError, SyntaxError...: all mean skip
        raise SkipItem(f"{name}: {type(err).__name__}: {err}") from err
