"""Grid helpers shared by the image tasks: cut an image into equal tiles, paste tiles back, mark
tiles with the red border and white number Spatial-SSRL (arXiv 2510.27606) draws on its patches,
black out cell borders and count the neighbours an arrangement keeps (Jigsaw-R1, arXiv
2505.23590)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tasks.base import SkipItem


def cut(image: Image.Image, rows: int, cols: int, min_tile: int) -> list[Image.Image]:
    """Equal tiles in raster order, after a centre crop that makes the grid divide the image
    exactly; SkipItem when a tile would be smaller than ``min_tile`` pixels on a side."""
    tile_w = image.width // cols
    tile_h = image.height // rows
    if min(tile_w, tile_h) < min_tile:
        raise SkipItem(f"{image.size} image: {tile_w}x{tile_h} tiles, below min_tile={min_tile}")
    left = (image.width - tile_w * cols) // 2
    top = (image.height - tile_h * rows) // 2
    return [
        image.crop((left + c * tile_w, top + r * tile_h, left + (c + 1) * tile_w, top + (r + 1) * tile_h))
        for r in range(rows)
        for c in range(cols)
    ]


def paste(tiles: list[Image.Image], rows: int, cols: int) -> Image.Image:
    """Equal tiles pasted in raster order into one ``rows x cols`` image."""
    tile_w, tile_h = tiles[0].size
    canvas = Image.new("RGB", (tile_w * cols, tile_h * rows))
    for i, tile in enumerate(tiles):
        canvas.paste(tile, ((i % cols) * tile_w, (i // cols) * tile_h))
    return canvas


def mark(tile: Image.Image, label: str) -> Image.Image:
    """A copy of ``tile`` with a 2-pixel red border and ``label`` in white near its top-left
    corner."""
    marked = tile.copy()
    draw = ImageDraw.Draw(marked)
    draw.rectangle((0, 0, tile.width - 1, tile.height - 1), outline=(255, 0, 0), width=2)
    size = max(8, min(tile.size) // 5)
    draw.text(
        (4, 3),
        label,
        fill=(255, 255, 255),
        font=ImageFont.load_default(size=size),
        stroke_width=1,
        stroke_fill=(0, 0, 0),
    )
    return marked


def grid_name(rows: int, cols: int) -> str:
    """``2 rows by 3 columns``: a grid as the prompts describe it."""
    return f"{rows} row{'s' * (rows > 1)} by {cols} column{'s' * (cols > 1)}"


def borders(
    rows: int, cols: int, row: int, col: int, width: int, height: int, ratio: float
) -> tuple[int, int, int, int]:
    """Pixels blacked out at the ``(left, top, right, bottom)`` edges of cell ``(row, col)`` of a
    ``rows x cols`` grid of ``width x height`` cells: ``ratio`` of the cell at the image's outer
    edges and half that at an inner edge, so a seam between two cells loses ``ratio`` of a cell, as
    Jigsaw-R1's ``mask_image`` does."""
    across = int(width * ratio)
    down = int(height * ratio)
    return (
        across if col == 0 else across // 2,
        down if row == 0 else down // 2,
        across if col == cols - 1 else across // 2,
        down if row == rows - 1 else down // 2,
    )


def mask_borders(image: Image.Image, rows: int, cols: int, ratio: float) -> Image.Image:
    """A copy of ``image`` (cut into ``rows x cols`` equal cells from its top-left corner) with each
    cell's `borders` black; pixels right of or below the last whole cell are left alone."""
    pixels = np.array(image.convert("RGB"))  # [H, W, 3]
    width = image.width // cols
    height = image.height // rows
    for row in range(rows):
        for col in range(cols):
            left = col * width
            top = row * height
            cut_left, cut_top, cut_right, cut_bottom = borders(rows, cols, row, col, width, height, ratio)
            cell = pixels[top : top + height, left : left + width]
            cell[:cut_top], cell[height - cut_bottom :], cell[:, :cut_left] = 0, 0, 0
            cell[:, width - cut_right :] = 0
    return Image.fromarray(pixels)


def neighbour_accuracy(pred: Sequence[int], truth: Sequence[int], rows: int, cols: int) -> float:
    """Share of the ``2 rows cols - rows - cols`` neighbour pairs of the original grid (left-right
    and top-bottom) whose two pieces an arrangement places side by side the same way, wherever it
    puts them.

    ``pred`` and ``truth`` are answers in the convention of `tasks.answers`: for each original slot
    in raster order, the label of the piece placed there. Shifting a whole correct row keeps its
    inner pairs.
    """
    where = {label: slot for slot, label in enumerate(pred)}
    kept = total = 0
    for slot, label in enumerate(truth):
        row, col = divmod(slot, cols)
        for step, inside, across in ((1, col + 1 < cols, True), (cols, row + 1 < rows, False)):  # right, below
            if not inside:
                continue
            total += 1
            first = where[label]
            second = where[truth[slot + step]]
            # side by side means in one row too: the last slot of a row and the first of the next
            # are not
            kept += second - first == step and (not across or first // cols == second // cols)
    return kept / total
