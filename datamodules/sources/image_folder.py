"""`ImageFolder`: every image file under a directory tree, in sorted path order."""

from __future__ import annotations

from PIL import Image, ImageOps

from datamodules.sources.base import Source, find_files
from datamodules.sources.limits import MAX_IMAGE_PIXELS, check_limit, check_pixels
from tasks import SkipItem


class ImageFolder(Source):
    """Images found recursively under ``root``, sorted by path so an index names the same file on
    every run.

    EXIF orientation is applied, so an upright photo stays upright for rotation tasks. A file that
    cannot be decoded raises `tasks.SkipItem`.

    Args:
        root: Directory searched recursively.
        extensions: File suffixes to include, matched case-insensitively.
        max_side: Downsize, keeping the aspect ratio, so that the longer side is at most this many
            pixels; ``None`` keeps the stored size.
        max_image_pixels: Most pixels of an image as decoded (JPEGs decode at 1/2, 1/4 or 1/8 scale
            when that fits); a larger one is skipped unread (counted as ``too_large``).
    """

    modality = "image"

    def __init__(
        self,
        root: str,
        extensions: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".webp", ".bmp"),
        max_side: int | None = None,
        max_image_pixels: int = MAX_IMAGE_PIXELS,
    ):
        if max_side is not None and max_side < 1:
            raise ValueError(f"max_side must be a positive number of pixels or None, got {max_side}")
        self.max_image_pixels = check_limit(max_image_pixels, "max_image_pixels")
        self.root, self.extensions, self.paths = find_files(root, extensions, "ImageFolder")
        self.max_side = max_side

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Image.Image:
        path = self.paths[index]
        try:
            return self._load(path)
        except SkipItem:
            raise
        except Exception as err:  # decoders raise OSError, ValueError, SyntaxError...: all mean skip
            raise SkipItem(f"{path}: {type(err).__name__}: {err}") from err

    def describe(self, index: int) -> str:
        return self.paths[index]

    def _load(self, path: str) -> Image.Image:
        with Image.open(path) as image:
            if self.max_side is not None:
                # JPEG can decode at 1/2, 1/4 or 1/8 scale directly: much faster for large photos
                image.draft("RGB", (self.max_side, self.max_side))
            check_pixels(image, path, self.max_image_pixels, reduce=True)
            image.load()  # decode everything now, so a truncated file fails here and not inside a task
            image = ImageOps.exif_transpose(image)
            image = _to_rgb(image)
        if self.max_side is not None:
            image.thumbnail((self.max_side, self.max_side))
        return image


def _to_rgb(image: Image.Image) -> Image.Image:
    """RGB, with transparent pixels composited on white (a bare convert leaves arbitrary colours
    there)."""
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, (255, 255, 255))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    return image.convert("RGB")
