"""Regional depth ordering (Spatial-SSRL, arXiv 2510.27606): one flat region in each of three depth
bands of the normalised depth map, marked with shuffled numbers (or colours); the answer lists them
from nearest to farthest. Spatial-SSRL normalises depth between its 0.5th and 99.5th percentiles,
takes bands 0-0.3, 0.35-0.65 and 0.7-1 and 25x25 patches (of ~1024x768 DIODE images) whose
normalised depth varies by less than 0.15.
"""

from __future__ import annotations

import random

import numpy as np

from tasks.base import SkipItem
from tasks.depth.common import DepthOrdering, far_apart, flat_pixels

_BANDS = [[0.0, 0.3], [0.35, 0.65], [0.7, 1.0]]
_TRIES = 2000  # flat pixels of a band looked at for one clear of the markers already placed


class RegionalDepthOrder(DepthOrdering):
    """Mark one flat region in each depth band and ask for the regions from nearest to farthest.

    Depth is normalised to [0, 1] between its 0.5th and 99.5th percentiles. A region is a square
    patch whose normalised depth varies by less than ``flatness``; its centre's normalised depth
    picks its band. The gaps between bands make the order unambiguous.

    Args:
        bands: Normalised depth intervals ``[low, high]``, one region each, non-overlapping, 2 to 9
            of them.
        patch: Side of a region as a fraction of the image's shorter side.
        flatness: Most a region's normalised depth may vary.
        **kwargs: Marker and reward options (see `tasks.depth.common.DepthOrdering`) and answer
            format options (see `tasks.Task`).
    """

    name = "regional_depth_order"
    levels = {
        "2regions": {"bands": [[0.0, 0.3], [0.7, 1.0]]},
        "3regions": {},
        "4regions": {"bands": [[0.0, 0.2], [0.27, 0.47], [0.53, 0.73], [0.8, 1.0]]},
    }

    def __init__(
        self,
        bands: list[list[float]] = _BANDS,  # noqa: B006  (never mutated)
        patch: float = 0.033,
        flatness: float = 0.15,
        **kwargs,
    ):
        super().__init__(**kwargs)
        ordered = sorted([float(low), float(high)] for low, high in bands)
        if (
            not 2 <= len(ordered) <= 9
            or any(low > high for low, high in ordered)
            or any(a[1] >= b[0] for a, b in zip(ordered, ordered[1:], strict=False))
        ):
            raise ValueError(f"bands must be 2 to 9 disjoint [low, high] intervals, got {bands}")
        if not 0 < patch < 0.5 or flatness <= 0:
            raise ValueError(f"patch must be in (0, 0.5) and flatness > 0, got {patch}, {flatness}")
        self.check_style(len(ordered))
        self.bands = ordered
        self.patch = patch
        self.flatness = flatness

    def pick(
        self, rgb: np.ndarray, depth: np.ndarray, radius: int, rng: random.Random, name: str
    ) -> list[tuple[int, int]]:
        norm, flat = flat_pixels(depth, self.patch, self.flatness, radius)
        levels = norm[flat[:, 0], flat[:, 1]]  # [M]
        chosen: list[tuple[int, int]] = []
        for low, high in self.bands:
            inside = flat[(levels >= low) & (levels <= high)]
            order = rng.sample(range(len(inside)), min(len(inside), _TRIES))
            tried = (tuple(int(c) for c in inside[i][::-1]) for i in order)
            spot = next((p for p in tried if far_apart(p, chosen, 2 * radius + 2)), None)
            if spot is None:
                raise SkipItem(
                    f"{name}: no flat region {self.patch:.3f} of the image wide with normalised "
                    f"depth in [{low}, {high}] clear of the other markers"
                )
            chosen.append(spot)
        return chosen

    def question(self, k: int) -> str:
        listed = f"with {self.listing(k)} circles" if self.labels == "colours" else self.listing(k)
        return (
            f"Regions of this image are marked {listed}. Taking into account what they show, where "
            "they are and any other cues, order the regions by their distance from the camera."
        )
