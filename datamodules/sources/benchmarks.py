"""`Benchmark`: the rows of a released labelled-benchmark file, each checked when the file is read.

Subclasses read one kind each: `MCQBenchmark` (CV-Bench, MMBench, MMAU), `GroundingBenchmark`
(RefCOCO) and `MomentBenchmark` (Charades-STA). Column names are their arguments, so one class reads
every layout of its kind; configs/eval/*.yaml set them per benchmark. See `tables` for the file
formats and media cells.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path

from datamodules.sources import tables
from datamodules.sources.base import Source
from datamodules.sources.jsonl import RowSkips
from datamodules.sources.limits import MAX_IMAGE_PIXELS, MAX_LINE_BYTES, TOO_LARGE, check_limit
from tasks import SkipItem
from tasks.extras import require


class Benchmark(Source):
    """Rows of a released benchmark file, each checked when the file is read and turned into zero or
    more records; a bad row (missing column, undecodable image, answer not among the options, box
    outside the image, media path leaving ``root``, an image or a line over its limit, ...) is
    skipped, counted in ``skipped_rows`` (by kind in ``skip_reasons``) and logged once with the
    first example of each kind.

    Args:
        path: A ``.parquet``, ``.jsonl``, ``.json`` (a list of objects), ``.tsv`` / ``.csv`` or
            Charades-STA ``.txt`` file, or a folder of ``.parquet`` shards (a Hugging Face dataset
            download).
        root: Folder that media paths in the rows are relative to (and may not leave); ``None``
            means the folder holding ``path`` (``path`` itself when it is a folder).
        path_format: Turns a media path cell into a path under ``root``, e.g.
            ``"Charades_v1_480/{}.mp4"`` for bare ids.
        limit: Keep only the first this many usable items (a quick look at a large benchmark).
        max_image_pixels: Most pixels of an image; a larger one skips its row (or item) unread:
            its size is read from its header.
        max_line_bytes: Most bytes of a line of a ``.jsonl`` or ``.txt`` file; a longer line is
            skipped without being held whole.
    """

    def __init__(
        self,
        path: str,
        root: str | None = None,
        path_format: str = "{}",
        limit: int | None = None,
        max_image_pixels: int = MAX_IMAGE_PIXELS,
        max_line_bytes: int = MAX_LINE_BYTES,
    ):
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be >= 1 or None, got {limit}")
        self.max_image_pixels = check_limit(max_image_pixels, "max_image_pixels")
        self.max_line_bytes = check_limit(max_line_bytes, "max_line_bytes")
        try:
            if path_format.format("x") == path_format:
                raise ValueError
        except (ValueError, IndexError, KeyError):
            raise ValueError(f"path_format must hold one {{}} for the cell, got {path_format!r}") from None
        self.path_format = path_format
        owner = type(self).__name__
        files = tables.table_files(path, owner)
        if any(file.suffix == ".parquet" for file in files):
            require("pyarrow.parquet", "eval", f"{owner} reads parquet files with pyarrow")  # before any work
        where = Path(path).expanduser()
        self.root = (
            Path(root).expanduser().resolve()
            if root is not None
            else (where if where.is_dir() else where.parent).resolve()
        )
        self.records, skips = self._read(files, where, limit)
        self.skipped_rows = skips.count
        self.skip_reasons = dict(skips.reasons)
        if not self.records:
            raise ValueError(f"{owner}: no usable rows in {str(where)!r}")

    def _read(self, files: list[Path], where: Path, limit: int | None) -> tuple[list[dict], RowSkips]:
        """The records of every usable row (the first ``limit``), and the skipped rows, logged."""
        skips = RowSkips(type(self).__name__, str(where))
        records: list[dict] = []
        for number, place, row in tables.read_rows(files, type(self).__name__, self.max_line_bytes):
            if limit is not None and len(records) >= limit:
                break
            try:
                if not isinstance(row, dict) or "_error" in row:
                    raise ValueError(row.get("_error", "not an object") if isinstance(row, dict) else "not an object")
                records.extend(self.parse(row, f"{where.name}[{number}]"))
            except Exception as err:  # whatever a bad row raises (a decoder's error, RecursionError, ...): skipped
                skips.add(
                    place,
                    str(err)[:300]
                    if isinstance(err, ValueError | SkipItem)
                    else f"{type(err).__name__}: {str(err)[:200]}",
                )
        skips.report()
        return records[:limit], skips  # a row of several sentences may pass the limit

    @abstractmethod
    def parse(self, row: dict, name: str) -> list[dict]:
        """Check one row and return its records (what `__getitem__` needs); ValueError ``kind:
        detail`` or `tasks.SkipItem` when the row cannot be used."""

    def __len__(self) -> int:
        return len(self.records)

    def describe(self, index: int) -> str:
        return self.records[index]["name"]

    def media(self, row: dict, column: str) -> list:
        """The media references (bytes or files inside ``root``) of a row's cell."""
        return tables.media_refs(tables.cell(row, column), self.root, self.path_format)

    def images(self, row: dict, column: str, name: str, strings: str = "path") -> list:
        """``(reference, size)`` of each image of a row's cell, checked by decoding it; ValueError
        if one cannot be, or (unread) if it has more than ``max_image_pixels`` pixels."""
        refs = tables.media_refs(tables.cell(row, column), self.root, self.path_format, strings)
        sizes = []
        for ref in refs:
            try:
                sizes.append(self.image(ref, name).size)
            except SkipItem as err:
                reason = str(err) if err.kind == TOO_LARGE else f"undecodable image: {err}"
                raise ValueError(reason) from None
        return list(zip(refs, sizes, strict=True))

    def image(self, ref, name: str):
        """The RGB image of a media reference (`tables.open_image` within ``max_image_pixels``)."""
        return tables.open_image(ref, name, self.max_image_pixels)
