"""`SyntheticScenes`: procedurally drawn upright outdoor scenes, so image tasks need no data on
disk.

Sky on top, ground below, a sun in the sky: "up" is plain from the pixels, so 4-way rotation is
learnable by a tiny random-init model. Ground rising to the left and the sun in the left half make
the halves differ (jigsaw).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image

from datamodules.sources.base import Source

SKY_TOP = np.array([0.15, 0.35, 0.80])
SKY_LOW = np.array([0.60, 0.78, 0.95])
GROUND = np.array([0.30, 0.60, 0.20])
SUN = np.array([1.00, 0.88, 0.25])


class SyntheticScenes(Source):
    """Upright outdoor scenes drawn on the fly; item ``i`` is a pure function of ``(seed, i)``.

    Each scene: a sky with a vertical blue gradient; green ground, darker towards the bottom, below
    a horizon at 0.55-0.75 of the height that slopes so there is more ground on the left; a yellow
    sun of random size in the left half of the sky; random colour jitter; Gaussian pixel noise
    (sigma 0.03).

    Args:
        size: Number of distinct scenes (the length of the source).
        image_size: Side of the square RGB images, in pixels.
        seed: Selects a different family of scenes.
    """

    modality = "image"

    def __init__(self, size: int = 10000, image_size: int = 56, seed: int = 0):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if image_size < 8:
            raise ValueError(f"image_size must be >= 8 pixels, got {image_size}")
        self.size = size
        self.image_size = image_size
        self.seed = seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Image.Image:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticScenes of size {self.size}")
        rng = np.random.default_rng([self.seed, index])
        return Image.fromarray(draw_scene(rng, self.image_size))

    def describe(self, index: int) -> str:
        return f"SyntheticScenes(seed={self.seed})[{index}]"


@lru_cache(maxsize=8)
def _grid(side: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre coordinates in [0, 1]: rows ``[side, 1]`` and columns ``[1, side]``."""
    centres = (np.arange(side) + 0.5) / side
    return centres[:, None], centres[None, :]


def draw_scene(rng: np.random.Generator, side: int) -> np.ndarray:
    """One upright scene as a uint8 array ``[side, side, 3]``; all randomness from ``rng``."""
    y, x = _grid(side)
    horizon = rng.uniform(0.55, 0.75) + rng.uniform(0.04, 0.12) * (x - 0.5)  # [1, W]; higher on the left
    sky_top = SKY_TOP + rng.uniform(-0.08, 0.08, 3)
    sky_low = SKY_LOW + rng.uniform(-0.08, 0.08, 3)
    height = np.clip(y / horizon, 0.0, 1.0)[..., None]  # [H, W, 1]: 0 at the top, 1 at the horizon
    sky = sky_top + (sky_low - sky_top) * height
    depth = np.clip((y - horizon) / (1.0 - horizon), 0.0, 1.0)[..., None]  # 0 at the horizon, 1 at the bottom
    ground = (GROUND + rng.uniform(-0.08, 0.08, 3)) * (1.0 - 0.4 * depth)
    image = np.where((y > horizon)[..., None], ground, sky)  # [H, W, 3]

    radius = rng.uniform(0.06, 0.12)
    # the lowest horizon point is >= 0.49, so this keeps the whole disc in the sky
    cy = rng.uniform(radius + 0.03, 0.46 - radius)
    cx = rng.uniform(0.10, 0.45)
    sun = (x - cx) ** 2 + (y - cy) ** 2 < radius**2  # [H, W]
    image[sun] = SUN + rng.uniform(-0.05, 0.05, 3)

    image = image * rng.uniform(0.9, 1.1, 3) + rng.uniform(-0.05, 0.05)
    image += rng.normal(0.0, 0.03, image.shape)
    return (np.clip(image, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
