import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402


def make_item(modality: str, seed: int = 0):
    """A raw media item of ``modality`` with visible structure (no two pixels regions alike)."""
    rng = np.random.default_rng(seed)
    if modality == "image":
        h, w = 84, 112
        y, x = np.mgrid[0:h, 0:w]
        arr = np.stack([x * 255 // w, y * 255 // h, (x + y) * 127 // (h + w)], -1).astype(np.uint8)
        arr = arr + rng.integers(0, 8, arr.shape, dtype=np.uint8)
        return Image.fromarray(arr)
    raise NotImplementedError(f"no sample item for modality {modality!r}")


@pytest.fixture
def sample_item():
    return make_item
