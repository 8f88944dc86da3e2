"""The media of exported examples on disk: content parts to files and back, losslessly and
byte-for-byte reproducibly (no timestamps): images as PNG, videos as one PNG strip of their frames
stacked top to bottom, audio as 32-bit float mono WAV, point clouds and any other array as NPY.

A stored part keeps its other fields and names its file in place of the media: ``{"type": "image",
"image": {"file": "media/000003-1.png", "sha256": "..."}}``; reading checks the digest, so a damaged
file is caught even when it still decodes.
"""

from __future__ import annotations

import hashlib
import io
import struct
from pathlib import Path

import numpy as np
from PIL import Image

from datamodules.sources.jsonl import inside, load_rgb
from datamodules.sources.limits import MAX_IMAGE_PIXELS
from tasks import SkipItem

_MEDIA_KEYS = {"image": "image", "video": "video", "audio": "audio", "point_cloud": "points"}
_WAV_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")  # RIFF header, a 16-byte fmt chunk, the data chunk header


def save_messages(messages: list[dict], folder: Path, stem: str) -> list[dict]:
    """JSON-ready copies of ``messages`` whose media are written under ``folder/media`` as
    ``<stem>-<k>.<ext>`` (``k`` counts the media parts of the example)."""
    (folder / "media").mkdir(parents=True, exist_ok=True)
    written = 0

    def save(part: dict, key: str) -> dict:
        nonlocal written
        if key not in part:
            return dict(part)
        data, ext = encode(part["type"], part[key], part.get("sampling_rate"))
        name = f"media/{stem}-{written}.{ext}"
        (folder / name).write_bytes(data)
        written += 1
        ref = {"file": name, "sha256": hashlib.sha256(data).hexdigest()}
        if part["type"] == "video":
            ref["frames"] = len(part[key])
        return {**part, key: ref}

    return _map_media(messages, save)


def load_messages(messages: list[dict], folder: Path, max_pixels: int = MAX_IMAGE_PIXELS) -> list[dict]:
    """The messages `save_messages` wrote, media decoded again; SkipItem naming the file when one is
    missing, leaves ``folder``, does not match its digest, does not decode or is an image (or video
    strip) of more than ``max_pixels`` pixels."""

    def load(part: dict, key: str) -> dict:
        ref = part.get(key)
        if not isinstance(ref, dict):
            return part
        return {**part, key: decode(part["type"], _read(folder, ref), ref, max_pixels)}

    return _map_media(messages, load)


def _map_media(messages: list[dict], convert) -> list[dict]:
    """Copies of ``messages`` with ``convert(part, media_key)`` applied to each media part, in
    order."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(dict(message))
            continue
        parts = [
            convert(part, _MEDIA_KEYS[part["type"]]) if part["type"] in _MEDIA_KEYS else dict(part) for part in content
        ]
        out.append({**message, "content": parts})
    return out


def _read(folder: Path, ref: dict) -> Path:
    try:
        path = inside(folder, ref.get("file"))
    except ValueError as err:
        raise SkipItem(str(err)) from err
    if hashlib.sha256(path.read_bytes()).hexdigest() != ref.get("sha256"):
        raise SkipItem(f"{path}: contents differ from the exported file (sha256)")
    return path


def encode(kind: str, value, sampling_rate: int | None = None) -> tuple[bytes, str]:
    """The file bytes and extension of one medium."""
    buffer = io.BytesIO()
    if isinstance(value, Image.Image):
        value.save(buffer, format="PNG")
        return buffer.getvalue(), "png"
    if kind == "video":  # [T, H, W, 3] (or a list of frames) -> a [T * H, W, 3] strip
        frames = np.stack(
            [np.asarray(frame.convert("RGB")) if isinstance(frame, Image.Image) else frame for frame in value]
        ).astype(np.uint8)
        Image.fromarray(frames.reshape(-1, *frames.shape[2:])).save(buffer, format="PNG")
        return buffer.getvalue(), "png"
    if kind == "audio":
        return wav_bytes(np.asarray(value, dtype=np.float32), int(sampling_rate)), "wav"
    np.save(buffer, np.asarray(value), allow_pickle=False)
    return buffer.getvalue(), "npy"


def decode(kind: str, path: Path, ref: dict, max_pixels: int = MAX_IMAGE_PIXELS):
    """One medium read back from ``path`` (``ref`` is its reference in the part) as the content part
    held it; SkipItem when it does not decode, or is an image (or video strip) over ``max_pixels``
    pixels."""
    try:
        if kind == "image":
            return load_rgb(path, max_pixels)
        if kind == "video":
            frames = int(ref["frames"])
            strip = np.asarray(load_rgb(path, max_pixels))
            return strip.reshape(frames, strip.shape[0] // frames, *strip.shape[1:])
        if kind == "audio":
            return read_wav(path.read_bytes())[0]
        return np.load(path, allow_pickle=False)
    except SkipItem:
        raise
    except Exception as err:  # a truncated or foreign file: numpy, struct and reshape raise all kinds
        raise SkipItem(f"{path}: {type(err).__name__}: {err}") from err


def wav_bytes(wave: np.ndarray, sampling_rate: int) -> bytes:
    """A mono WAV file of 32-bit IEEE floats (format 3): lossless for float32 samples."""
    data = wave.astype("<f4").tobytes()
    header = _WAV_HEADER.pack(
        b"RIFF", 36 + len(data), b"WAVE", b"fmt ", 16, 3, 1, sampling_rate, 4 * sampling_rate, 4, 32, b"data", len(data)
    )
    return header + data


def read_wav(data: bytes) -> tuple[np.ndarray, int]:
    """``(samples [S] float32, sampling rate)`` of a file `wav_bytes` wrote; ValueError for anything
    else."""
    riff, _, wave, fmt, _, tag, channels, rate, _, _, bits, chunk, size = _WAV_HEADER.unpack_from(data)
    if (riff, wave, fmt, chunk, tag, channels, bits) != (b"RIFF", b"WAVE", b"fmt ", b"data", 3, 1, 32):
        raise ValueError("not a mono 32-bit float WAV file as the pretext benchmark writes them")
    if len(data) != _WAV_HEADER.size + size:
        raise ValueError(f"WAV data holds {len(data) - _WAV_HEADER.size} bytes, its header says {size}")
    return np.frombuffer(data, "<f4", offset=_WAV_HEADER.size).astype(np.float32), rate
