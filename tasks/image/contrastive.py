"""Contrastive pairs (SSL4RL, arXiv 2510.16416; PKU-ML/SSL4RL
build_benchmarks/makecontrastive_mmbench.py).

Two strong augmentations (random resized crop of 8-30% of the area, colour jitter, grayscale, blur,
solarization, equalization, flip) of one image (``positive``) or of two different images
(``negative``), one half each; the policy answers ``positive`` or ``negative``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from PIL import Image

from tasks import answers
from tasks.base import Example, SkipItem, Task
from tasks.image import augment

ANSWERS = ("positive", "negative")


def halves(image: Image.Image) -> list[Image.Image]:
    """The two halves of an image along its longer side."""
    w, h = image.size
    if w >= h:
        return [image.crop((0, 0, w // 2, h)), image.crop((w - w // 2, 0, w, h))]
    return [image.crop((0, 0, w, h // 2)), image.crop((0, h - h // 2, w, h))]


class Contrastive(Task):
    """Ask whether two strongly augmented views come from the same image (probability 1/2) or two
    images.

    The item is a pair ``[image, other]``: `datamodules.PretextDataModule` passes each example the
    item and ``partners`` (one) other item of the same split, drawn by the example's random stream.
    A single image (as in a notebook) stands for two: its halves along the longer side, so negatives
    come from the same photograph (harder than SSL4RL's, which pair two images).

    Args:
        scale: Area range of the random resized crop (SSL4RL strong augmentation: 0.08 to 0.3).
        size: Side of each (square) view in pixels (SSL4RL: 224).
        p: Probability of each photometric augmentation (SSL4RL: 0.8).
        min_size: Images whose shorter side is below this many pixels are skipped.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "contrastive"
    modality = "image"
    parts = ("accuracy",)
    levels = {"mild": {"scale": [0.3, 0.6], "p": 0.3}, "strong": {}}  # strong: SSL4RL's augmentations
    partners = 1

    def __init__(
        self,
        scale: list[float] = [0.08, 0.3],  # noqa: B006
        size: int = 224,
        p: float = 0.8,
        min_size: int = 28,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if len(scale) != 2 or not 0 < scale[0] <= scale[1] <= 1:
            raise ValueError(f"scale must be [low, high] with 0 < low <= high <= 1, got {scale}")
        if not 0 <= p <= 1:
            raise ValueError(f"p must be in [0, 1], got {p}")
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.scale = list(scale)
        self.size = size
        self.p = p
        self.min_size = min_size

    def make_example(self, item: Image.Image | Sequence[Image.Image], rng: random.Random) -> Example:
        images = halves(item.convert("RGB")) if isinstance(item, Image.Image) else [i.convert("RGB") for i in item]
        if len(images) != 2 or min(min(i.size) for i in images) < self.min_size:
            raise SkipItem(f"need two images of at least {self.min_size} px, got {[i.size for i in images]}")
        positive = rng.random() < 0.5
        sources = [0, 0] if positive else [0, 1]
        rng.shuffle(sources)
        views = [
            augment.photometric(augment.resized_crop(images[s], rng, self.scale, self.size), rng, self.p)
            for s in sources
        ]
        media = [{"type": "image", "image": view} for view in views]
        question = (
            "These two images are augmentations (crops, colour changes, flips, ...) of either the same original "
            "image or two different images. Answer positive if they come from the same image and negative if "
            "they come from two different images."
        )
        answer = ANSWERS[0] if positive else ANSWERS[1]
        return Example(self.user_message(media, question), answer, self.name, {"sources": sources})

    def answer_text(self, example: Example) -> str:
        return example.answer

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        choice = answers.parse_choice(answer, ANSWERS)
        return None if choice is None else {"accuracy": float(choice == example.answer)}
