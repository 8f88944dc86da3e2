"""Grid helpers shared by the image tasks: cut an image into equal tiles, paste tiles back, mark tiles with
the red border and white number Spatial-SSRL (arXiv 2510.27606) draws on its patches."""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

from tasks.base import SkipItem


def cut(image: Image.Image, rows: int, cols: int, min_tile: int) -> list[Image.Image]:
    """Equal tiles in raster order, after a centre crop that makes the grid divide the image exactly;
    SkipItem when a tile would be smaller than ``min_tile`` pixels on a side."""
    tile_w, tile_h = image.width // cols, image.height // rows
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
    """A copy of ``tile`` with a 2-pixel red border and ``label`` in white near its top-left corner."""
    marked = tile.copy()
    draw = ImageDraw.Draw(marked)
    draw.rectangle((0, 0, tile.width - 1, tile.height - 1), outline=(255, 0, 0), width=2)
    size = max(8, min(tile.size) // 5)
    draw.text((4, 3), label, fill=(255, 255, 255), font=ImageFont.load_default(size=size),
              stroke_width=1, stroke_fill=(0, 0, 0))
    return marked


def grid_name(rows: int, cols: int) -> str:
    """``2 rows by 3 columns``: a grid as the prompts describe it."""
    return f"{rows} row{'s' * (rows > 1)} by {cols} column{'s' * (cols > 1)}"
