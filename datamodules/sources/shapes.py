"""Flat shapes on a pixel grid, shared by the synthetic sources that draw them (`SyntheticVideos`,
`SyntheticQuestions`): a circle or square mask, and a small palette of colours that have plain
names."""

from __future__ import annotations

import numpy as np

#: Saturated colours a question can name; far apart in RGB so a tiny vision tower tells them apart.
COLOURS = {
    "red": (0.95, 0.15, 0.15),
    "green": (0.15, 0.85, 0.2),
    "blue": (0.2, 0.3, 1.0),
    "yellow": (0.95, 0.9, 0.15),
    "magenta": (0.9, 0.2, 0.9),
    "cyan": (0.15, 0.9, 0.9),
}
KINDS = ("circle", "square")


def pixel_centres(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column pixel-centre coordinates, ``[H, W]`` each (the pixel in row ``r`` covers ``[r,
    r + 1)``)."""
    y, x = np.mgrid[0:height, 0:width] + 0.5
    return y, x


def shape_mask(kind: str, x: np.ndarray, y: np.ndarray, cx, cy, radius: float) -> np.ndarray:
    """Pixels inside a circle (``radius``) or an axis-aligned square (half side ``radius``) centred
    at ``(cx, cy)``; ``cx`` and ``cy`` broadcast against the coordinates ``x`` and ``y`` (one frame
    or ``[T, 1, 1]``)."""
    if kind == "circle":
        return (x - cx) ** 2 + (y - cy) ** 2 <= radius**2
    if kind == "square":
        return np.maximum(abs(x - cx), abs(y - cy)) <= radius
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
