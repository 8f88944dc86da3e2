"""``zoo preview``: what the policy will see, drawn from a config's ``data`` section alone (no model
is loaded): a PNG contact sheet with each example's media, prompt and answer, and the same text on
stdout. An example of a task with tools shows its demonstration turn by turn, with the pictures its
tool calls return (`tasks.tools.replay`, as a multi-turn rollout builds the conversation)."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from PIL import Image, ImageDraw

from tasks import Example, Task
from tasks.tools.base import ToolError, replay, turns_of
from zoo.panels import FONT_SIZE, PAD, PANEL_HEIGHT, TILE_WIDTH, Panel, label_font, note, panels, wrap

log = logging.getLogger(__name__)

MAX_PANELS = 24
MAX_PROMPT_LINES = 14


@dataclass
class Shown:
    """One example as the preview draws it.

    Attributes:
        example: The example, as training would get it.
        answer: The answer as the policy should write it (`tasks.Task.answer_text`).
        item: The raw item the task made it from, when known (RGB-D items add their depth map).
        turns: For a task with tools, its demonstration's turns (`tasks.Task.demonstration`).
        results: The content parts each call turn's tool returned, one list per turn (empty after
            the answer).
        error: Why the demonstration's calls could not be replayed (a tool refused one), if so.
    """

    example: Example
    answer: str
    item: Any = None
    turns: list[str] = field(default_factory=list)
    results: list[list[dict]] = field(default_factory=list)
    error: str = ""


def shown(task: Task, example: Example, item: Any = None) -> Shown:
    """`Shown` of an example made by ``task`` (from ``item``); a task with tools adds its
    demonstration, replayed."""
    out = Shown(example, task.answer_text(example), item)
    if task.toolbox is not None:
        out.turns = turns_of(task.demonstration(example))
        try:
            conversation = replay(example.messages, out.turns, task.toolbox.tools, example)
        except ToolError as err:  # the expert's call refused: the sheet says so
            conversation, out.error = example.messages, f"demonstration: {err}"
        out.results = tool_results(conversation[len(example.messages) :])
    return out


def tool_results(added: list[dict]) -> list[list[dict]]:
    """The content parts of the tool result after each turn, from the messages `replay` added (an
    assistant message per turn, a user message after each call)."""
    results: list[list[dict]] = []
    for message in added:
        if message["role"] == "assistant":
            results.append([])
        else:
            results[-1] = message["content"]
    return results


def _pictures(item: Shown) -> list[Panel]:
    """The prompt's panels, then the pictures each tool call returned, captioned with its turn."""
    pictures = panels(item.example, item.item)
    for t, parts in enumerate(item.results, 1):
        for panel in panels(Example([{"role": "user", "content": parts}], None, item.example.task)):
            pictures.append(Panel(panel.image, f"turn {t} -> {panel.caption}"))
    if item.error:
        pictures.append(note("demonstration refused", item.error))
    return pictures


def _fit(image: Image.Image, width: int) -> Image.Image:
    """``image`` scaled to `PANEL_HEIGHT` rows, and down to ``width`` columns when wider."""
    scale = min(PANEL_HEIGHT / image.height, width / image.width)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.NEAREST if scale > 1 else Image.Resampling.LANCZOS)  # pixels kept


def tile(item: Shown, number: int) -> Image.Image:
    """One example: its panels flowed into rows, then the task, the wrapped prompt and the
    answer."""
    font = label_font()
    inner = TILE_WIDTH - 2 * PAD
    line = FONT_SIZE + 4
    pictures = _pictures(item)
    if len(pictures) > MAX_PANELS:
        more = len(pictures) - MAX_PANELS + 1
        pictures = pictures[: MAX_PANELS - 1] + [note(f"+{more} more", f"{more} more pictures not drawn")]
    placed = []
    x = PAD
    y = PAD
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
    text += [(s, (0, 0, 0)) for s in wrap(item.example.prompt_text, font, inner, MAX_PROMPT_LINES)]
    for t, turn in enumerate(item.turns, 1):
        text += [(s, (120, 60, 0)) for s in wrap(f"turn {t}: {turn}", font, inner, 3)]
    if item.error:
        text += [(s, (160, 0, 0)) for s in wrap(item.error, font, inner, 2)]
    text += [(s, (0, 110, 0)) for s in wrap(f"answer: {item.answer}", font, inner, 3)]
    canvas = Image.new("RGB", (TILE_WIDTH, top + len(text) * line + PAD), "white")
    draw = ImageDraw.Draw(canvas)
    for image, caption, px, py in placed:
        canvas.paste(image, (px, py))
        draw.text((px, py + PANEL_HEIGHT + 1), caption, fill=(90, 90, 90), font=font)
    for n, (string, colour) in enumerate(text):
        draw.text((PAD, top + n * line), string, fill=colour, font=font)
    return canvas


def contact_sheet(items: list[Shown], columns: int = 4) -> Image.Image:
    """Tiles of ``items`` in a grid of ``columns``, rows as tall as their tallest tile, grey
    gutters."""
    if not items:
        raise ValueError("nothing to draw: no examples")
    tiles = [tile(item, n) for n, item in enumerate(items)]
    columns = max(1, min(columns, len(tiles)))
    rows = [tiles[r : r + columns] for r in range(0, len(tiles), columns)]
    heights = [max(t.height for t in row) for row in rows]
    sheet = Image.new("RGB", (columns * (TILE_WIDTH + 2) + 2, sum(heights) + 2 * len(rows) + 2), (160, 160, 160))
    for r, row in enumerate(rows):
        for c, image in enumerate(row):
            sheet.paste(image, (2 + c * (TILE_WIDTH + 2), 2 + sum(heights[:r]) + 2 * r))
    return sheet


def describe(item: Shown, number: int) -> str:
    """The text of one example for stdout: task, uid, the whole prompt, the demonstration's turns
    (a task with tools) and the answer."""
    lines = [f"--- #{number} {item.example.task} ({item.example.uid})", item.example.prompt_text]
    for t, turn in enumerate(item.turns, 1):
        got = ", ".join(part["type"] for part in (item.results[t - 1] if t <= len(item.results) else []))
        lines.append(f"turn {t}: {turn}" + (f"\n  tool result: {got}" if got else ""))
    if item.error:
        lines.append(item.error)
    return "\n".join([*lines, f"answer: {item.answer}"])


@contextmanager
def _recording(tasks: list[Task]) -> Iterator[dict[int, tuple[Example, Any]]]:
    """Remember the raw item of every example ``tasks`` make (keyed by the example's id) while
    open."""
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
    """The first ``n`` examples of ``split`` (``train``, ``val`` or ``test``), as a run's first
    epoch gets them."""
    stage, loader = {
        "train": ("fit", "train_dataloader"),
        "val": ("validate", "val_dataloader"),
        "test": ("test", "test_dataloader"),
    }[split]
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
            for example in batch[: n - len(out)]:
                task = by_name.get(example.task)
                item = made.get(id(example), (None, None))[1]
                answer = json.dumps(example.answer, default=str)
                out.append(shown(task, example, item) if task else Shown(example, answer, item))
            if len(out) >= n:
                break
    return out


def parse_config(args: list[str]):
    """A ``zoo fit`` configuration (``--config`` files and dotted overrides), parsed and checked;
    nothing is built (no logger either, so its package need not be installed)."""
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
    """The ``name`` section (``data``, ``model``) of a parsed configuration, instantiated as a
    ``base``."""
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
    """The data module of a ``zoo fit`` configuration: the whole configuration is parsed and
    checked, only its ``data`` section is instantiated."""
    from lightning import LightningDataModule

    return build_section(parse_config(args), "data", LightningDataModule)


def preview(
    fit_args: list[str] | None = None,
    n: int = 16,
    out: str = "preview.png",
    split: Literal["train", "val", "test"] = "train",
    seed: int | None = None,
    columns: int = 4,
) -> None:
    """Draw the examples a configuration's run would train (or validate, or test) on into a PNG
    contact sheet.

    Only the ``data`` section of the configuration is built: no model is loaded, nothing is
    downloaded. Each example's media, prompt and answer are drawn and printed, and skipped items are
    counted.

    Args:
        fit_args: Every other argument, read as by ``zoo fit``: ``--config`` (repeatable) and dotted
            overrides such as ``--data.init_args.batch_size 4``.
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
