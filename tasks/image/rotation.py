"""Rotation prediction: how far was the image turned? Follows SSL4RL (arXiv 2510.16416), which
rotates by multiples of 90 degrees and crops any other angle to the largest upright rectangle inside
the rotated image.
"""

from __future__ import annotations

import math
import random
import re
from typing import Literal

from PIL import Image

from tasks import answers
from tasks.base import Example, SkipItem, Task

_TRANSPOSE = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}
# an angle with an optional unit; matched on the stripped answer, so no two quantifiers compete for
# spaces
_DEGREES = re.compile(r"([+-]?\d{1,9})(?:\s*(?:°|degrees?))?", re.IGNORECASE)


class Rotation(Task):
    """Show an image rotated counter-clockwise by a random angle and ask for the angle.

    Args:
        angles: The angles to draw from, in degrees counter-clockwise (modulo 360; at least two
            distinct).
        labels: ``"degrees"``: the answer is the angle as a number, compared modulo 360.
            ``"letters"``: the angles are listed as lettered options (``A) 0 degrees``, ...) and the
            answer is the letter.
        show_original: Show the original image first and the rotated one second (SSL4RL) instead of
            the rotated image alone, asked how far it is turned from upright.
        square: Centre-crop to a square first, so a quarter turn does not give itself away by the
            aspect ratio.
        min_size: Images whose shorter side (after cropping) is below this many pixels are skipped.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "rotation"
    modality = "image"
    parts = ("accuracy",)
    levels = {"4way": {"angles": [0, 90, 180, 270]}, "8way": {"angles": [0, 45, 90, 135, 180, 225, 270, 315]}}

    def __init__(
        self,
        angles: list[int] = [0, 90, 180, 270],  # noqa: B006  (never mutated; a list reads best in --help)
        labels: Literal["degrees", "letters"] = "degrees",
        show_original: bool = False,
        square: bool = True,
        min_size: int = 28,
        **kwargs,
    ):
        super().__init__(**kwargs)
        normalised = [int(a) % 360 for a in angles]
        if len(set(normalised)) != len(normalised) or len(normalised) < 2:
            raise ValueError(f"angles must hold at least two angles distinct modulo 360, got {angles}")
        if labels not in ("degrees", "letters"):
            raise ValueError(f"labels must be 'degrees' or 'letters', got {labels!r}")
        if labels == "letters" and len(normalised) > 26:
            raise ValueError(f"labels='letters' allows at most 26 angles, got {len(normalised)}")
        if min_size < 1:
            raise ValueError(f"min_size must be >= 1, got {min_size}")
        self.angles = normalised
        self.labels = labels
        self.show_original = show_original
        self.square = square
        self.min_size = min_size

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        image = item.convert("RGB")
        if self.square:
            image = _centre_crop(image, min(image.size), min(image.size))
        angle = rng.choice(self.angles)
        rotated = rotate(image, angle)
        if min(*image.size, *rotated.size) < self.min_size:
            raise SkipItem(f"image {image.size} rotated to {rotated.size} is below min_size={self.min_size}")
        media = [{"type": "image", "image": image}] if self.show_original else []
        media.append({"type": "image", "image": rotated})
        meta = {"angle": angle, "choices": list(self.angles)}
        return Example(self.user_message(media, self._question()), angle, self.name, meta)

    def _question(self) -> str:
        if self.show_original:
            question = "The second image is the first image rotated counter-clockwise. By how many degrees?"
        else:
            question = "This image has been rotated counter-clockwise from upright. By how many degrees?"
        if self.labels == "letters":
            return f"{question}\n{answers.choice_prompt([f'{a} degrees' for a in self.angles])}"
        listed = ", ".join(str(a) for a in self.angles)
        return f"{question} It is one of {listed}. Answer with the number of degrees."

    def answer_text(self, example: Example) -> str:
        if self.labels == "letters":
            return answers.letter(example.meta["choices"].index(example.answer))
        return str(example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        angle = self.parse_answer(example, answer)
        return None if angle is None else {"accuracy": float(angle == example.answer)}

    def parse_answer(self, example: Example, answer: str) -> int | None:
        """The angle an answer names, in degrees modulo 360 (``-270``, ``90 degrees``, ``90°`` and
        ``450`` are all 90)."""
        if self.labels == "letters":
            angle = answers.parse_letter(answer, example.meta["choices"], self.strict_letters)
        else:
            match = _DEGREES.fullmatch(answer.strip())
            angle = int(match[1]) if match else None
        return None if angle is None else angle % 360


def rotate(image: Image.Image, angle: int) -> Image.Image:
    """``image`` turned ``angle`` degrees counter-clockwise: exact for quarter turns, otherwise
    cropped to the largest upright rectangle inside the rotated image so no fill colour shows."""
    angle %= 360
    if angle == 0:
        return image.copy()
    if angle in _TRANSPOSE:
        return image.transpose(_TRANSPOSE[angle])
    width, height = inscribed_size(*image.size, math.radians(angle))
    turned = image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True)
    # rounding down keeps every pixel centre inside the rotated source, so none of the fill shows
    return _centre_crop(turned, max(int(width), 1), max(int(height), 1))


def inscribed_size(width: float, height: float, theta: float) -> tuple[float, float]:
    """Largest axis-aligned ``(w, h)`` centred inside a ``width x height`` rectangle rotated by
    ``theta``.

    A corner of the inner box stays inside iff ``w c + h s <= width`` and ``w s + h c <= height``
    (``c, s = |cos|, |sin|``). Maximising ``w h`` on one constraint alone gives ``w c = h s`` = half
    its bound; that is the answer when it also meets the other, otherwise both constraints are
    tight.
    """
    c = abs(math.cos(theta))
    s = abs(math.sin(theta))
    if s < 1e-12 or c < 1e-12:
        return (width, height) if s < 1e-12 else (height, width)
    if width <= 2 * s * c * height:
        return width / (2 * c), width / (2 * s)
    if height <= 2 * s * c * width:
        return height / (2 * s), height / (2 * c)
    det = c * c - s * s
    return (width * c - height * s) / det, (height * c - width * s) / det


def _centre_crop(image: Image.Image, width: int, height: int) -> Image.Image:
    left = (image.width - width) // 2
    top = (image.height - height) // 2
    return image.crop((left, top, left + width, top + height))
