"""`GroundingBenchmark`: referring-expression benchmarks (RefCOCO, RefCOCO+, RefCOCOg) read from
their released files."""

from __future__ import annotations

from typing import Literal

from datamodules.sources import tables
from datamodules.sources.benchmarks import Benchmark
from tasks import Referring

_BOX_SLACK = 1.0  # pixels a box may overhang the image (float rounding in released boxes); clipped


class GroundingBenchmark(Benchmark):
    """Referring expressions with their boxes (RefCOCO, RefCOCO+, RefCOCOg): `tasks.Referring` items
    for `tasks.ReferringGrounding`, one per expression (a row listing several sentences gives one
    item each).

    Boxes must lie inside the image (an overhang of up to 1 pixel is clipped) and have a positive
    area; the image is decoded when the file is read to check both.

    Args:
        path: See `Benchmark`.
        box_format: How ``bbox`` is written, in pixels: ``"xywh"`` (left, top, width, height: COCO,
            RefCOCO) or ``"xyxy"`` (left, top, right, bottom). No default: a wrong guess halves
            every IoU silently.
        image: Column of the image (HF ``Image`` struct, bytes or path).
        expressions: Column of the referring expression: a string, or a list of strings (several
            sentences for one object).
        bbox: Column of the box.
        **kwargs: ``root``, ``path_format``, ``limit`` and the row limits (``max_image_pixels``,
            ``max_line_bytes``), see `Benchmark`.
    """

    modality = "referring"

    def __init__(
        self,
        path: str,
        box_format: Literal["xywh", "xyxy"],
        image: str = "image",
        expressions: str = "expression",
        bbox: str = "bbox",
        **kwargs,
    ):
        if box_format not in ("xywh", "xyxy"):
            raise ValueError(f"box_format must be 'xywh' or 'xyxy', got {box_format!r}")
        self.box_format = box_format
        self.columns = dict(image=image, expressions=expressions, bbox=bbox)
        super().__init__(path, **kwargs)

    def parse(self, row: dict, name: str) -> list[dict]:
        value = tables.cell(row, self.columns["bbox"])
        if not isinstance(value, list) or len(value) != 4:
            raise ValueError(f"bad box: {value!r} is not four numbers"[:200])
        x, y, a, b = (tables.number(v, "box") for v in value)
        box = [x, y, x + a, y + b] if self.box_format == "xywh" else [x, y, a, b]
        ((ref, (width, height)),) = self.images(row, self.columns["image"], name)
        if min(box) < -_BOX_SLACK or box[2] > width + _BOX_SLACK or box[3] > height + _BOX_SLACK:
            raise ValueError(f"box outside the image: {box} in {width} x {height}")
        box = [min(max(v, 0.0), limit) for v, limit in zip(box, (width, height, width, height), strict=True)]
        if box[0] >= box[2] or box[1] >= box[3]:
            raise ValueError(f"bad box: {box} has no area")
        sentences = tables.cell(row, self.columns["expressions"])
        sentences = [
            s for s in (sentences if isinstance(sentences, list) else [sentences]) if isinstance(s, str) and s.strip()
        ]
        if not sentences:
            raise ValueError("missing column: no referring expression")
        return [{"name": f"{name}#{i}", "image": ref, "expression": s, "box": box} for i, s in enumerate(sentences)]

    def __getitem__(self, index: int) -> Referring:
        record = self.records[index]
        image = self.image(record["image"], record["name"])
        return Referring(image, [(record["expression"], list(record["box"]))], record["name"])
