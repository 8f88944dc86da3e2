"""``zoo preview``: what the policy will see, drawn from a config's ``data`` section alone (no model is loaded):
a PNG contact sheet with each example's media, prompt and answer, and the same text on stdout."""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tasks import Example, Task
from tasks.pointcloud.common import FAR, NEAR, normalize, render_depth

log = logging.getLogger(__name__)

TILE_WIDTH = 480  # pixels of one example's tile
PANEL_HEIGHT = 112  # pixels of each image, frame, spectrogram or projection
PAD = 6
MAX_FRAMES = 8  # frames shown of one video (evenly spaced), fewer each when a prompt holds several
MAX_PANELS = 24
MAX_PROMPT_LINES = 14
FONT_SIZE = 12
MAX_TEXT = 4000  # characters of a prompt wrapped onto a tile (stdout gets all of it)
#: Spectrogram colours from silent to loud: black, purple, orange, pale yellow.
LOUDNESS = np.array([[0, 0, 0], [90, 20, 120], [230, 90, 40], [250, 250, 190]], np.float64)


@dataclass
class Shown:
    """One example as the preview draws it.

    Attributes:
        example: The example, as training would get it.
        answer: The answer as the policy should write it (`tasks.Task.answer_text`).
        item: The raw item the task made it from, when known (RGB-D items add their depth map).
    """

    example: Example
    answer: str
    item: Any = None


@dataclass
class Panel:
    """One picture of a tile with a caption under it."""

    image: Image.Image
    caption: str = ""


def shown(task: Task, example: Example, item: Any = None) -> Shown:
    """`Shown` of an example made by ``task`` (from ``item``)."""
    return Shown(example, task.answer_text(example), item)


def panels(example: Example, item: Any = None) -> list[Panel]:
    """The pictures of what the policy sees, in prompt order, then what the raw item adds (a depth map)."""
    parts = [p for m in example.messages if isinstance(m["content"], list) for p in m["content"]]
    media = [p for p in parts if p["type"] != "text"]
    videos = sum(p["type"] == "video" for p in media)
    out: list[Panel] = []
    for number, part in enumerate(media, 1):
        try:
            drawn = _part_panels(part, max(2, MAX_FRAMES // max(videos, 1)))
        except Exception as err:  # one odd part must not hide the rest of the sheet
            log.warning("%s: cannot draw its %s part %d: %s", example.uid or example.task, part["type"], number, err)
            drawn = [_note(f"cannot draw {part['type']}", str(err))]
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
        wave, rate = np.asarray(part["audio"], np.float32), int(part["sampling_rate"])
        width = int(np.clip(len(wave) / rate * 100, 120, TILE_WIDTH - 2 * PAD))
        image = spectrogram(wave, rate).resize((width, PANEL_HEIGHT))
        return [Panel(image, f"{len(wave) / rate:.2f}s, {rate} Hz, 0-{rate // 2000} kHz")]
    if kind == "point_cloud":
        points = np.asarray(part["points"], np.float32)  # [P, 3 | 6]
        inside = bool(np.abs(points[:, :3]).max(initial=0) <= 1)  # as given, so slabs keep their sizes
        caption = f"{len(points)} points, front view{'' if inside else ', rescaled'}"
        return [Panel(render_depth(points if inside else normalize(points), PANEL_HEIGHT), caption)]
    return [_note(f"<{kind}> not drawn", f"preview cannot draw {kind} parts; the policy gets it as it is")]


def _note(caption: str, message: str = "") -> Panel:
    """A grey panel holding ``message`` (what could not be drawn, and why)."""
    image = Image.new("RGB", (2 * PANEL_HEIGHT, PANEL_HEIGHT), (225, 225, 225))
    lines = _wrap(message, _font(), image.width - 8, PANEL_HEIGHT // (FONT_SIZE + 2))
    ImageDraw.Draw(image).multiline_text((4, 4), "\n".join(lines), fill=(120, 0, 0), font=_font(), spacing=2)
    return Panel(image, caption)


def _ramp(values: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``values`` in [0, 1] (any shape) mapped piecewise linearly through colour ``stops`` ``[K, 3]``: uint8
    ``[..., 3]``."""
    position = np.clip(values, 0, 1) * (len(stops) - 1)
    low = np.minimum(position.astype(int), len(stops) - 2)
    frac = (position - low)[..., None]
    return (stops[low] * (1 - frac) + stops[low + 1] * frac).round().astype(np.uint8)


def spectrogram(wave: np.ndarray, sampling_rate: int) -> Image.Image:
    """Log-magnitude spectrogram of a mono ``wave`` ``[S]``: time to the right, low frequencies at the bottom,
    80 dB of range below the loudest bin (Hann windows of about 32 ms)."""
    n_fft = 2 ** max(6, round(math.log2(sampling_rate * 0.032)))
    wave = np.pad(wave, (0, max(0, n_fft - len(wave))))
    hop = max(n_fft // 4, len(wave) // 2000)  # bounds the work on long clips
    frames = np.lib.stride_tricks.sliding_window_view(wave, n_fft)[::hop] * np.hanning(n_fft)  # [T, n_fft]
    db = 10 * np.log10(np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-12)  # [T, F]
    level = np.clip((db - db.max()) / 80 + 1, 0, 1)
    return Image.fromarray(_ramp(level.T[::-1], LOUDNESS))  # [F, T, 3]


def _depth_panel(depth: np.ndarray) -> Panel:
    """The item's depth map, orange near to blue far (as point-cloud renders), invalid pixels black."""
    valid = np.isfinite(depth) & (depth > 0)
    if not valid.any():
        return _note("depth", "no valid depth pixels")
    near, far = float(depth[valid].min()), float(depth[valid].max())
    scaled = np.where(valid, (depth - near) / max(far - near, 1e-6), 0)  # [H, W] 0 near .. 1 far
    rgb = np.where(valid[..., None], _ramp(scaled, np.stack([NEAR, FAR]) * 255), 0).astype(np.uint8)
    return Panel(Image.fromarray(rgb), f"depth {near:.2f}-{far:.2f} m")


def _font() -> ImageFont.ImageFont:
    return ImageFont.load_default(size=FONT_SIZE)


def _fit(image: Image.Image, width: int) -> Image.Image:
    """``image`` scaled to `PANEL_HEIGHT` rows, and down to ``width`` columns when wider."""
    scale = min(PANEL_HEIGHT / image.height, width / image.width)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.NEAREST if scale > 1 else Image.Resampling.LANCZOS)  # pixels kept


def _wrap(text: str, font: ImageFont.ImageFont, width: int, max_lines: int) -> list[str]:
    """``text`` word-wrapped to ``width`` pixels (its own line breaks kept), cut to ``max_lines`` lines."""
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
        lines = lines[:max_lines - 1] + ["... (the whole text is printed)"]
    return lines


def tile(item: Shown, number: int) -> Image.Image:
    """One example: its panels flowed into rows, then the task, the wrapped prompt and the answer."""
    font, inner = _font(), TILE_WIDTH - 2 * PAD
    line = FONT_SIZE + 4
    pictures = panels(item.example, item.item)
    if len(pictures) > MAX_PANELS:
        more = len(pictures) - MAX_PANELS + 1
        pictures = pictures[:MAX_PANELS - 1] + [_note(f"+{more} more", f"{more} more pictures not drawn")]
    placed, x, y = [], PAD, PAD
    for panel in pictures:
        image = _fit(panel.image, inner)
        width = max(image.width, min(inner, round(font.getlength(panel.caption)) + 4))
        if x > PAD and x + width > TILE_WIDTH - PAD:
            x, y = PAD, y + PANEL_HEIGHT + line + PAD
        placed.append((image, panel.caption, x, y))
        x += width + PAD
    top = y + (PANEL_HEIGHT + line + PAD if placed else 0)
    header = f"#{number} {item.example.task}  {item.example.uid}"
    text = [(header, (0, 0, 140))]
    text += [(s, (0, 0, 0)) for s in _wrap(item.example.prompt_text, font, inner, MAX_PROMPT_LINES)]
    text += [(s, (0, 110, 0)) for s in _wrap(f"answer: {item.answer}", font, inner, 3)]
    canvas = Image.new("RGB", (TILE_WIDTH, top + len(text) * line + PAD), "white")
    draw = ImageDraw.Draw(canvas)
    for image, caption, px, py in placed:
        canvas.paste(image, (px, py))
        draw.text((px, py + PANEL_HEIGHT + 1), caption, fill=(90, 90, 90), font=font)
    for n, (string, colour) in enumerate(text):
        draw.text((PAD, top + n * line), string, fill=colour, font=font)
    return canvas


def contact_sheet(items: list[Shown], columns: int = 4) -> Image.Image:
    """Tiles of ``items`` in a grid of ``columns``, rows as tall as their tallest tile, grey gutters."""
    if not items:
        raise ValueError("nothing to draw: no examples")
    tiles = [tile(item, n) for n, item in enumerate(items)]
    columns = max(1, min(columns, len(tiles)))
    rows = [tiles[r:r + columns] for r in range(0, len(tiles), columns)]
    heights = [max(t.height for t in row) for row in rows]
    sheet = Image.new("RGB", (columns * (TILE_WIDTH + 2) + 2, sum(heights) + 2 * len(rows) + 2), (160, 160, 160))
    for r, row in enumerate(rows):
        for c, image in enumerate(row):
            sheet.paste(image, (2 + c * (TILE_WIDTH + 2), 2 + sum(heights[:r]) + 2 * r))
    return sheet


def describe(item: Shown, number: int) -> str:
    """The text of one example for stdout: task, uid, the whole prompt and the answer."""
    return f"--- #{number} {item.example.task} ({item.example.uid})\n{item.example.prompt_text}\nanswer: {item.answer}"


@contextmanager
def _recording(tasks: list[Task]) -> Iterator[dict[int, tuple[Example, Any]]]:
    """Remember the raw item of every example ``tasks`` make (keyed by the example's id) while open."""
    made: dict[int, tuple[Example, Any]] = {}
    for task in tasks:
        def make(item, rng, original=task.make_example):
            example = original(item, rng)
            made[id(example)] = (example, item)
            return example
        task.make_example = make  # an instance attribute: the class's method is back once it is deleted
    try:
        yield made
    finally:
        for task in tasks:
            del task.make_example


def draw(datamodule, n: int, split: str = "train") -> list[Shown]:
    """The first ``n`` examples of ``split`` (``train``, ``val`` or ``test``), as a run's first epoch gets them."""
    stage, loader = {"train": ("fit", "train_dataloader"), "val": ("validate", "val_dataloader"),
                     "test": ("test", "test_dataloader")}[split]
    datamodule.setup(stage)
    if hasattr(datamodule, "num_workers"):
        datamodule.num_workers = 0  # the same batches for any number of workers; items are recorded here
    by_name = dict(getattr(datamodule, "tasks", {}))
    loader = getattr(datamodule, loader)()
    if isinstance(loader, list) and not loader:
        raise ValueError(f"the data module has no {split} examples (val_size 0?)")
    out: list[Shown] = []
    with _recording(list(by_name.values())) as made:
        for batch in loader:
            for example in batch[:n - len(out)]:
                task = by_name.get(example.task)
                answer = task.answer_text(example) if task else json.dumps(example.answer, default=str)
                out.append(Shown(example, answer, made.get(id(example), (None, None))[1]))
            if len(out) >= n:
                break
    return out


def parse_config(args: list[str]):
    """A ``zoo fit`` configuration (``--config`` files and dotted overrides), parsed and checked; nothing is
    built (no logger either, so its package need not be installed)."""
    from zoo.cli import ZooCLI, cli

    class ParseOnly(ZooCLI):
        def before_instantiate_classes(self) -> None:
            """No logger is built, so its package need not be installed."""

        def instantiate_classes(self) -> None:
            """Nothing: the model stays a class path and a checkpoint name."""

    with warnings.catch_warnings():  # `zoo preview ...` is in sys.argv too, on purpose
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        return cli(args, run=False, cli_class=ParseOnly).config


def build_section(config, name: str, base: type, command: str = "preview"):
    """The ``name`` section (``data``, ``model``) of a parsed configuration, instantiated as a ``base``."""
    from jsonargparse import ArgumentParser

    parser = ArgumentParser()
    parser.add_subclass_arguments(base, name, required=True)
    try:
        return getattr(parser.instantiate(parser.parse_object({name: config[name]})), name)
    except Exception as err:  # jsonargparse wraps the error of a source or task in pages of its own frames
        cause = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        raise SystemExit(f"[zoo] {command}: cannot build the {name} section: {type(cause).__name__}: {cause}") from err


def build_data(args: list[str]):
    """The data module of a ``zoo fit`` configuration: the whole configuration is parsed and checked, only its
    ``data`` section is instantiated."""
    from lightning import LightningDataModule

    return build_section(parse_config(args), "data", LightningDataModule)


def preview(fit_args: list[str] | None = None, n: int = 16, out: str = "preview.png",
            split: Literal["train", "val", "test"] = "train", seed: int | None = None, columns: int = 4) -> None:
    """Draw the examples a configuration's run would train (or validate, or test) on into a PNG contact sheet.

    Only the ``data`` section of the configuration is built: no model is loaded, nothing is downloaded. Each
    example's media, prompt and answer are drawn and printed, and skipped items are counted.

    Args:
        fit_args: Every other argument, read as by ``zoo fit``: ``--config`` (repeatable) and dotted overrides
            such as ``--data.init_args.batch_size 4``.
        n: Examples to draw.
        out: The PNG to write.
        split: The training examples of the first epoch, or the validation or test examples.
        seed: The data module's seed (None: the configuration's).
        columns: Tiles per row of the sheet.
    """
    for name, value in (("n", n), ("columns", columns)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    datamodule = build_data(list(fit_args or []) + ([] if seed is None else ["--data.init_args.seed", str(seed)]))
    try:
        items = draw(datamodule, n, split)
    except (ValueError, RuntimeError) as err:  # what the run would stop on too: too few items, a broken source
        raise SystemExit(f"[zoo] preview: cannot draw {split} examples: {err}") from err
    for number, item in enumerate(items):
        print(describe(item, number))
    contact_sheet(items, columns).save(out)
    skips = getattr(datamodule, "skip_counts", {})
    for (source, kind), count in sorted(skips.items()):
        print(f"[zoo] preview: skipped {count} item(s) of {source}: {kind}")
    short = f" (asked for {n}: the {split} split holds no more)" if len(items) < n else ""
    print(f"[zoo] preview: {len(items)} {split} examples{short} -> {out}")
