"""The pictures of what a policy sees in an example's prompt (images, video frames, audio
spectrograms, point cloud views, an RGB-D item's depth map): drawn by `zoo preview`'s contact sheets
and the rollout logs' media strips (`callbacks.rollout_media`)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tasks import Example
from tasks.pointcloud.common import FAR, NEAR, normalize, render_depth

log = logging.getLogger(__name__)

TILE_WIDTH = 480  # pixels of one example's tile
PANEL_HEIGHT = 112  # pixels of each image, frame, spectrogram or projection
PAD = 6
MAX_FRAMES = 8  # frames shown of one video (evenly spaced), fewer each when a prompt holds several
FONT_SIZE = 12
MAX_TEXT = 4000  # characters of a prompt wrapped onto a tile (stdout gets all of it)
#: Spectrogram colours from silent to loud: black, purple, orange, pale yellow.
LOUDNESS = np.array([[0, 0, 0], [90, 20, 120], [230, 90, 40], [250, 250, 190]], np.float64)


@dataclass
class Panel:
    """One picture of a tile with a caption under it."""

    image: Image.Image
    caption: str = ""


def panels(example: Example, item: Any = None) -> list[Panel]:
    """The pictures of what the policy sees, in prompt order, then what the raw item adds (a depth
    map)."""
    parts = [p for m in example.messages if isinstance(m["content"], list) for p in m["content"]]
    media = [p for p in parts if p["type"] != "text"]
    videos = sum(p["type"] == "video" for p in media)
    out: list[Panel] = []
    for number, part in enumerate(media, 1):
        try:
            drawn = _part_panels(part, max(2, MAX_FRAMES // max(videos, 1)))
        except Exception as err:  # one odd part must not hide the rest of the sheet
            log.warning("%s: cannot draw its %s part %d: %s", example.uid or example.task, part["type"], number, err)
            drawn = [note(f"cannot draw {part['type']}", str(err))]
        if len(media) > 1:  # numbered in prompt order, as the prompt's "Piece 2:<image>" refers to them
            drawn[0].caption = f"{number}: {drawn[0].caption}"
        out += drawn
    if getattr(item, "depth", None) is not None:
        out.append(_depth_panel(np.asarray(item.depth, np.float32)))
    return out


def _part_panels(part: dict, max_frames: int) -> list[Panel]:
    kind = part["type"]
    if kind == "image":
        image = part["image"]
        if isinstance(image, (str, Path)):  # a local file, as some chat formats give images
            image = Image.open(image)
        elif not isinstance(image, Image.Image):
            image = Image.fromarray(np.asarray(image, np.uint8))
        return [Panel(image.convert("RGB"), f"{image.width}x{image.height}")]
    if kind == "video":
        frames, fps = part["video"], float(part.get("fps") or 1.0)  # [T, H, W, 3]
        keep = np.linspace(0, len(frames) - 1, min(max_frames, len(frames))).round().astype(int)
        return [Panel(Image.fromarray(np.asarray(frames[i], np.uint8)), f"{i / fps:.2f}s") for i in keep]
    if kind == "audio":
        wave = np.asarray(part["audio"], np.float32)
        rate = int(part["sampling_rate"])
        width = int(np.clip(len(wave) / rate * 100, 120, TILE_WIDTH - 2 * PAD))
        image = spectrogram(wave, rate).resize((width, PANEL_HEIGHT))
        return [Panel(image, f"{len(wave) / rate:.2f}s, {rate} Hz, 0-{rate // 2000} kHz")]
    if kind == "point_cloud":
        points = np.asarray(part["points"], np.float32)  # [P, 3 | 6]
        inside = bool(np.abs(points[:, :3]).max(initial=0) <= 1)  # as given, so slabs keep their sizes
        caption = f"{len(points)} points, front view{'' if inside else ', rescaled'}"
        return [Panel(render_depth(points if inside else normalize(points), PANEL_HEIGHT), caption)]
    return [note(f"<{kind}> not drawn", f"preview cannot draw {kind} parts; the policy gets it as it is")]


def note(caption: str, message: str = "") -> Panel:
    """A grey panel holding ``message`` (what could not be drawn, and why)."""
    image = Image.new("RGB", (2 * PANEL_HEIGHT, PANEL_HEIGHT), (225, 225, 225))
    lines = wrap(message, label_font(), image.width - 8, PANEL_HEIGHT // (FONT_SIZE + 2))
    ImageDraw.Draw(image).multiline_text((4, 4), "\n".join(lines), fill=(120, 0, 0), font=label_font(), spacing=2)
    return Panel(image, caption)


def _ramp(values: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``values`` in [0, 1] (any shape) mapped piecewise linearly through colour ``stops`` ``[K,
    3]``: uint8 ``[..., 3]``."""
    position = np.clip(values, 0, 1) * (len(stops) - 1)
    low = np.minimum(position.astype(int), len(stops) - 2)
    frac = (position - low)[..., None]
    return (stops[low] * (1 - frac) + stops[low + 1] * frac).round().astype(np.uint8)


def spectrogram(wave: np.ndarray, sampling_rate: int) -> Image.Image:
    """Log-magnitude spectrogram of a mono ``wave`` ``[S]``: time to the right, low frequencies at
    the bottom, 80 dB of range below the loudest bin (Hann windows of about 32 ms)."""
    n_fft = 2 ** max(6, round(math.log2(sampling_rate * 0.032)))
    wave = np.pad(wave, (0, max(0, n_fft - len(wave))))
    hop = max(n_fft // 4, len(wave) // 2000)  # bounds the work on long clips
    frames = np.lib.stride_tricks.sliding_window_view(wave, n_fft)[::hop] * np.hanning(n_fft)  # [T, n_fft]
    db = 10 * np.log10(np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-12)  # [T, F]
    level = np.clip((db - db.max()) / 80 + 1, 0, 1)
    return Image.fromarray(_ramp(level.T[::-1], LOUDNESS))  # [F, T, 3]


def _depth_panel(depth: np.ndarray) -> Panel:
    """The item's depth map, orange near to blue far (as point-cloud renders), invalid pixels
    black."""
    valid = np.isfinite(depth) & (depth > 0)
    if not valid.any():
        return note("depth", "no valid depth pixels")
    near = float(depth[valid].min())
    far = float(depth[valid].max())
    scaled = np.where(valid, (depth - near) / max(far - near, 1e-6), 0)  # [H, W] 0 near .. 1 far
    rgb = np.where(valid[..., None], _ramp(scaled, np.stack([NEAR, FAR]) * 255), 0).astype(np.uint8)
    return Panel(Image.fromarray(rgb), f"depth {near:.2f}-{far:.2f} m")


def label_font() -> ImageFont.ImageFont:
    return ImageFont.load_default(size=FONT_SIZE)


def wrap(text: str, font: ImageFont.ImageFont, width: int, max_lines: int) -> list[str]:
    """``text`` word-wrapped to ``width`` pixels (its own line breaks kept), cut to ``max_lines``
    lines."""
    lines: list[str] = []
    for paragraph in text[:MAX_TEXT].splitlines() or [""]:
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if line and font.getlength(candidate) > width:
                lines.append(line)
                candidate = word
            while font.getlength(candidate) > width:  # a word longer than a line (a path, a URL) is cut
                cut = max(1, int(len(candidate) * width / font.getlength(candidate)) - 1)
                lines.append(candidate[:cut])
                candidate = candidate[cut:]
            line = candidate
        lines.append(line)
    if len(lines) > max_lines or len(text) > MAX_TEXT:
        lines = lines[: max_lines - 1] + ["... (the whole text is printed)"]
    return lines
