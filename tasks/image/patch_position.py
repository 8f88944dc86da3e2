"""Patch position (SSL4RL, arXiv 2510.16416; PKU-ML/SSL4RL
build_benchmarks/makeposition_mmbench.py).

A crop of 20-80% of one quadrant's width and height is shown after the full image (optionally
strongly augmented); the answer names the quadrant it came from: ``top-left``, ``top-right``,
``bottom-left`` or ``bottom-right``.
"""

from __future__ import annotations

import random

from PIL import Image

from tasks import answers
from tasks.base import Example, SkipItem, Task
from tasks.image import augment

QUADRANTS = ("top-left", "top-right", "bottom-left", "bottom-right")


class PatchPosition(Task):
    """Show an image and a crop from one of its quadrants; ask which quadrant.

    Args:
        scale: Range of the crop's width and height as a fraction of the quadrant's (SSL4RL: 0.2 to
            0.8).
        min_size: Crops below this many pixels on a side are not drawn; images too small for one are
            skipped.
        augment: Apply the strong photometric augmentations of `tasks.image.augment` to the crop
            (the ``_augmented`` variant of SSL4RL; its MMBench builder leaves them off).
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "patch_position"
    modality = "image"
    parts = ("accuracy",)
    levels = {
        "large": {"scale": [0.5, 0.8]},
        "small": {"scale": [0.2, 0.4], "min_size": 8},
        "augmented": {"augment": True},
    }

    def __init__(
        self,
        scale: list[float] = [0.2, 0.8],  # noqa: B006
        min_size: int = 28,
        augment: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if len(scale) != 2 or not 0 < scale[0] <= scale[1] <= 1:
            raise ValueError(f"scale must be [low, high] with 0 < low <= high <= 1, got {scale}")
        self.scale = list(scale)
        self.min_size = min_size
        self.augment = augment

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        image = item.convert("RGB")
        quadrant = rng.randrange(4)
        qw = image.width // 2
        qh = image.height // 2
        w = self._side(qw, rng)
        h = self._side(qh, rng)
        left = (quadrant % 2) * qw + rng.randrange(qw - w + 1)
        top = (quadrant // 2) * qh + rng.randrange(qh - h + 1)
        crop = image.crop((left, top, left + w, top + h))
        if self.augment:
            crop = augment.photometric(crop, rng, p=0.8)
        media = [{"type": "image", "image": image}, {"type": "image", "image": crop}]
        aug = " and then augmented (grayscale, colour jitter, solarization, ...)" if self.augment else ""
        question = (
            f"The second image is a crop of the first image{aug}. Which part of the first image is it from? The "
            "answer is one of: top-left, top-right, bottom-left, bottom-right."
        )
        meta = {"box": [left, top, left + w, top + h]}
        return Example(self.user_message(media, question), QUADRANTS[quadrant], self.name, meta)

    def _side(self, quadrant_side: int, rng: random.Random) -> int:
        low = max(self.min_size, round(self.scale[0] * quadrant_side))
        high = int(self.scale[1] * quadrant_side)
        if high < low:
            raise SkipItem(f"a quadrant side of {quadrant_side} px allows no crop of at least {self.min_size} px")
        return rng.randint(low, high)

    def answer_text(self, example: Example) -> str:
        return example.answer

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        quadrant = answers.parse_choice(answer, QUADRANTS)
        return None if quadrant is None else {"accuracy": float(quadrant == example.answer)}
