"""Memory bounds per row, the same in every reader: the pixels of one decoded image and the bytes of
one line of a JSONL or Charades ``.txt`` file. They are checked before anything is decoded (an
image's size comes from its header), so an oversized row is skipped and counted, never held in
memory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from PIL import Image

from tasks import SkipItem

#: Most pixels of one decoded image (8192 x 8192), below Pillow's own warning threshold
#: (``PIL.Image.MAX_IMAGE_PIXELS``, about 89 M; it refuses only past twice that).
MAX_IMAGE_PIXELS = 8192 * 8192
#: Most bytes of one line of a JSONL or ``.txt`` file (32 MiB: room for a few inline base64 images).
MAX_LINE_BYTES = 32 * 2**20
#: How a skipped oversized item is counted (``data/skipped/<source>/too_large``).
TOO_LARGE = "too_large"


def check_limit(value: int, name: str) -> int:
    """``value`` if it is a positive integer; ValueError naming the option otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_pixels(image: Image.Image, name: object, max_pixels: int, reduce: bool = False) -> None:
    """Refuse an opened, not yet decoded image of more than ``max_pixels`` pixels: `tasks.SkipItem`
    (kind ``too_large``) naming ``name``. With ``reduce``, a JPEG over the limit is first set to
    decode at 1/2, 1/4 or 1/8 scale (``draft``), when one of them fits."""
    width, height = image.size
    if reduce and width * height > max_pixels and image.format == "JPEG":
        for scale in (2, 4, 8):  # what a JPEG decoder gives at the cost of a smaller image
            if -(-width // scale) * -(-height // scale) <= max_pixels:
                image.draft(image.mode, (max(1, width // scale), max(1, height // scale)))
                width, height = image.size
                break
    if width * height > max_pixels:
        raise SkipItem(
            f"image too large: {name} is {width} x {height} = {width * height} pixels, "
            f"over max_image_pixels={max_pixels}",
            kind=TOO_LARGE,
        )


@contextmanager
def open_image(fp, name: object, max_pixels: int) -> Iterator[Image.Image]:
    """``Image.open(fp)`` once its header shows at most ``max_pixels`` pixels (`check_pixels`); an
    image past Pillow's own bomb limit is refused the same way."""
    try:
        image = Image.open(fp)
    except Image.DecompressionBombError as err:
        raise SkipItem(f"image too large: {name}: {err}", kind=TOO_LARGE) from None
    with image:
        check_pixels(image, name, max_pixels)
        yield image


def bounded_lines(file: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, raw line)`` of each line of a binary file; ``None`` for a line of more than
    ``max_bytes`` bytes (its newline not counted), which is read past in pieces, never held
    whole."""
    number = 0
    while raw := file.readline(max_bytes + 1):
        number += 1
        if len(raw) <= max_bytes or raw.endswith(b"\n"):
            yield number, raw
            continue
        while raw and not raw.endswith(b"\n"):
            raw = file.readline(2**20)
        yield number, None
