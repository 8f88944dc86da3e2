"""Strong image augmentations in the style of solo-learn (what SSL4RL, arXiv 2510.16416, applies in
``build_benchmarks/augcfg_strong.yaml``), drawn from a `random.Random` so examples stay
reproducible."""

from __future__ import annotations

import math
import random

from PIL import Image, ImageEnhance, ImageFilter, ImageOps


def resized_crop(image: Image.Image, rng: random.Random, scale: tuple[float, float], size: int) -> Image.Image:
    """A random crop covering ``scale`` of the area with an aspect ratio in [3/4, 4/3], resized to
    ``size``."""
    area = image.width * image.height
    for _ in range(10):
        target = area * rng.uniform(*scale)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= image.width and 0 < h <= image.height:
            x = rng.randrange(image.width - w + 1)
            y = rng.randrange(image.height - h + 1)
            return image.crop((x, y, x + w, y + h)).resize((size, size), Image.Resampling.BICUBIC)
    side = min(image.size)  # the fallback torchvision uses too: the centre square
    x = (image.width - side) // 2
    y = (image.height - side) // 2
    return image.crop((x, y, x + side, y + side)).resize((size, size), Image.Resampling.BICUBIC)


def photometric(image: Image.Image, rng: random.Random, p: float) -> Image.Image:
    """Colour jitter (brightness, contrast, saturation 0.8; hue 0.2), grayscale, blur, solarization,
    equalization and a horizontal flip, each applied with probability ``p``."""
    if rng.random() < p:
        for enhance in (ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color):
            image = enhance(image).enhance(rng.uniform(0.2, 1.8))
        hsv = image.convert("HSV")
        shift = int(rng.uniform(-0.2, 0.2) * 255)
        h, s, v = hsv.split()
        image = Image.merge("HSV", (h.point(lambda x: (x + shift) % 256), s, v)).convert("RGB")
    if rng.random() < p:
        image = ImageOps.grayscale(image).convert("RGB")
    if rng.random() < p:
        image = image.filter(ImageFilter.GaussianBlur(rng.uniform(0.1, 2.0)))
    if rng.random() < p:
        image = ImageOps.solarize(image, 128)
    if rng.random() < p:
        image = ImageOps.equalize(image)
    if rng.random() < p:
        image = ImageOps.mirror(image)
    return image
