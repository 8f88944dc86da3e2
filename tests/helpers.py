"""Shared test utilities."""

import importlib
import inspect
import pkgutil

import numpy as np
from PIL import Image


def discover(package, base):
    """Import every module under ``package``; return the concrete subclasses of ``base`` defined in it
    (test-local subclasses elsewhere are left out), sorted by import path."""
    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
        importlib.import_module(info.name)
    found, stack = set(), [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            inside = sub.__module__ == package.__name__ or sub.__module__.startswith(package.__name__ + ".")
            if inside and not inspect.isabstract(sub):
                found.add(sub)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def make_item(modality: str, seed: int = 0):
    """A raw media item of ``modality`` with visible structure (no two pixels regions alike)."""
    rng = np.random.default_rng(seed)
    if modality == "image":
        h, w = 84, 112
        y, x = np.mgrid[0:h, 0:w]
        arr = np.stack([x * 255 // w, y * 255 // h, (x + y) * 127 // (h + w)], -1).astype(np.uint8)
        arr = arr + rng.integers(0, 8, arr.shape, dtype=np.uint8)
        return Image.fromarray(arr)
    if modality == "video":
        from tasks import Video

        # 16 frames at 4 fps: a gradient background and a bright square moving left to right
        t, h, w = 16, 48, 64
        y, x = np.mgrid[0:h, 0:w]
        frames = np.empty((t, h, w, 3), np.uint8)
        for i in range(t):
            frames[i] = np.stack([x * 255 // w, y * 255 // h, np.full_like(x, 40 + 8 * i)], -1)
            left = 2 + 3 * i
            frames[i, 16:32, left:left + 12] = (255, 255, 0)
        frames = frames + rng.integers(0, 6, frames.shape, dtype=np.uint8)
        return Video(frames=frames, fps=4.0, name=f"sample-video-{seed}")
    if modality == "audio":
        from tasks import Audio

        # 2 s at 16 kHz: a rising chirp under decaying clicks every 0.25 s, plus a little noise
        sr = 16000
        t = np.arange(2 * sr) / sr
        wave = 0.4 * np.sin(2 * np.pi * (200 * t + 150 * t**2)) + 0.4 * np.exp(-30 * (t % 0.25))
        wave = wave + 0.01 * rng.standard_normal(len(t))
        return Audio(waveform=wave.astype(np.float32), sampling_rate=sr, name=f"sample-audio-{seed}")
    if modality == "audio_qa":
        from tasks import AudioQA

        return AudioQA(make_item("audio", seed), "What do you hear?", ["a chirp", "a dog", "speech", "rain"],
                       "a chirp")
    raise NotImplementedError(f"no sample item for modality {modality!r}")
