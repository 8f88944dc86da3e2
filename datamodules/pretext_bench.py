"""`PretextBench`: evaluate on an exported pretext benchmark (`datamodules.bench_export`) without
regenerating it.

Each set's task is rebuilt from the manifest (class and arguments) and verifies the completions;
examples keep their level id as task name (``jigsaw@3x3``), so ``zoo test`` logs
``test/jigsaw@3x3/accuracy`` per level.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections import Counter
from pathlib import Path

from lightning import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from datamodules.bench_export import FORMAT
from datamodules.bench_files import load_messages
from datamodules.sources.jsonl import json_lines
from datamodules.sources.limits import MAX_IMAGE_PIXELS, MAX_LINE_BYTES, check_limit
from tasks import Example, Reward, Task

log = logging.getLogger(__name__)


class PretextBench(LightningDataModule):
    """The examples of an exported pretext benchmark as the validation and test sets.

    Every example is read once when the data is set up: a missing, altered (sha256) or undecodable
    media file, or a malformed line, skips its example, counted per set (``skipped``) and logged.
    Ranks take contiguous shards of the remaining examples. A set name that leads out of ``path``
    (absolute, ``..``, a symlinked folder) is refused in one line when the manifest is read.

    Args:
        path: The exported folder (the one holding ``manifest.json``).
        tasks: Sets to evaluate: level ids (``jigsaw@3x3``) or task names (``jigsaw``: every level);
            ``None`` takes them all.
        content: Keep only the sets whose content parts are all of these kinds (``[text, image,
            video]`` for a vision-language policy); the others are left out with a log line.
            ``None`` keeps every set.
        batch_size: Examples per batch on each rank.
        num_workers: DataLoader worker processes.
        max_image_pixels: Most pixels of an image (or video strip); a larger one skips its example
            unread.
        max_line_bytes: Most bytes of a line of ``examples.jsonl``; a longer one is skipped, never
            held whole.
    """

    def __init__(
        self,
        path: str,
        tasks: list[str] | None = None,
        content: list[str] | None = None,
        batch_size: int = 8,
        num_workers: int = 0,
        max_image_pixels: int = MAX_IMAGE_PIXELS,
        max_line_bytes: int = MAX_LINE_BYTES,
    ):
        super().__init__()
        self.max_image_pixels = check_limit(max_image_pixels, "max_image_pixels")
        self.max_line_bytes = check_limit(max_line_bytes, "max_line_bytes")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        self.root = Path(path).expanduser().resolve()
        self.manifest = read_manifest(self.root)
        sets = self.manifest["sets"]
        self.folders = {name: set_folder(self.root, name) for name in sets}
        chosen = [name for name in sets if tasks is None or name in tasks or name.split("@")[0] in tasks]
        missing = sorted(set(tasks or []) - set(chosen) - {name.split("@")[0] for name in chosen})
        if missing:
            raise ValueError(f"{missing} names no set of {self.root}; it has {sorted(sets)}")
        if content is not None:
            left_out = [name for name in chosen if not set(sets[name]["content"]) <= set(content)]
            if left_out:
                rank_zero_info(f"[zoo] pretext bench: leaving out {left_out}, whose content is not all {content}")
            chosen = [name for name in chosen if name not in left_out]
        if not chosen:
            raise ValueError(f"no set of {self.root} is left to evaluate (tasks={tasks}, content={content})")
        self._tasks = {name: rebuild_task(sets[name]["task"]) for name in chosen}
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.skipped: Counter = Counter()  # examples skipped, by set
        self._records: list[tuple[str, dict]] | None = None

    @property
    def tasks(self) -> dict[str, Task]:
        """The rebuilt tasks by level id."""
        return dict(self._tasks)

    def verify(self, example: Example, completion: str) -> Reward:
        """Reward ``completion`` with the task of ``example``'s set, as rebuilt from the
        manifest."""
        return self._tasks[example.task].verify(example, completion)

    def canonical_answer(self, example: Example, completion: str):
        """The ballot of ``maj@k``: the answer as the set's task reads it (None: no valid one)."""
        return self._tasks[example.task].canonical_answer(example, completion)

    def setup(self, stage: str) -> None:
        module = self.trainer.lightning_module if self.trainer is not None else None
        takes = getattr(module, "content_kinds", None)
        if takes is not None:
            refused = {n: sorted(set(self.manifest["sets"][n]["content"]) - takes) for n in self._tasks}
            refused = {n: kinds for n, kinds in refused.items() if kinds}
            if refused:
                raise ValueError(
                    f"{type(module).__name__} cannot take the content of {refused}; choose the sets it "
                    "can with --data.init_args.tasks"
                )

    def records(self) -> list[tuple[str, dict]]:
        """``(set, line)`` of every usable example, in manifest order; read and checked once."""
        if self._records is None:
            self._records = []
            for name in self._tasks:
                expected = self.manifest["sets"][name]["examples"]
                good = read_lines(
                    self.folders[name], expected, self.skipped, name, self.max_line_bytes, self.max_image_pixels
                )
                self._records += [(name, line) for line in good]
                rank_zero_info(f"[zoo] pretext bench {name}: {len(good)} examples, {self.skipped[name]} skipped")
            if not self._records:
                raise ValueError(f"no example of {sorted(self._tasks)} in {self.root} could be read (see the log)")
        return self._records

    def val_dataloader(self) -> DataLoader:
        rank, world = (self.trainer.global_rank, self.trainer.world_size) if self.trainer is not None else (0, 1)
        records = self.records()
        shard = records[rank * len(records) // world : (rank + 1) * len(records) // world]
        batches = _Batches(self.folders, shard, self.batch_size, self.max_image_pixels)
        return DataLoader(batches, batch_size=None, collate_fn=list, num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()


def read_manifest(root: Path) -> dict:
    """The manifest of an exported benchmark; FileNotFoundError / ValueError naming what is
    wrong."""
    path = root / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{str(root)!r} holds no manifest.json: export one with `zoo pretext-bench export`")
    try:
        manifest = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path} is not JSON ({err}); export the benchmark again") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("sets"), dict):
        raise ValueError(f"{path} is not a {FORMAT} manifest")
    return manifest


def set_folder(root: Path, name: str) -> Path:
    """The folder of set ``name``, resolved: a folder under ``root``; ValueError in one line for a
    name that leads out of it (absolute, ``..``, a symlink out) or is the root itself."""
    manifest = root / "manifest.json"
    try:
        folder = (root / name).resolve()
    except (OSError, ValueError, RuntimeError) as err:  # a NUL byte, a symlink loop
        raise ValueError(f"{manifest}: set name {name!r} is no path ({err})") from None
    if folder == root or not folder.is_relative_to(root):
        raise ValueError(
            f"{manifest}: set name {name!r} leads out of the benchmark folder "
            "(absolute, '..' or a symlink out); export the benchmark again"
        )
    return folder


def rebuild_task(spec: dict) -> Task:
    """The task a manifest names: a `tasks.Task` class under ``tasks.`` and its arguments."""
    module, _, name = str(spec.get("class_path", "")).rpartition(".")
    cls = getattr(importlib.import_module(module), name, None) if module.split(".")[0] == "tasks" else None
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"manifest task {spec.get('class_path')!r} is not a tasks.Task class")
    return cls(**spec.get("init_args", {}))


def read_lines(
    folder: Path,
    expected: int,
    skips: Counter,
    name: str,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> list[dict]:
    """The lines of ``folder/examples.jsonl`` whose example loads in full; the others, and lines
    missing from the ``expected`` number, counted in ``skips[name]`` and logged."""
    path = folder / "examples.jsonl"
    good = []
    lines = list(json_lines(path, max_line_bytes)) if path.is_file() else []
    if len(lines) < expected:
        skips[name] += expected - len(lines)
        log.warning(
            "skipping %d examples of %s: %s holds %d of the %d lines the manifest counts",
            expected - len(lines),
            name,
            path,
            len(lines),
            expected,
        )
    for number, line in lines:
        try:
            if isinstance(line, dict) and "_error" in line:
                raise ValueError(line["_error"])
            to_example(folder, line, max_pixels)
        except Exception as err:  # whatever a damaged line raises: that example is skipped, not the set
            skips[name] += 1
            log.warning("skipping %s line %d: %s", path, number, f"{type(err).__name__}: {str(err)[:300]}")
            continue
        good.append(line)
    return good


def to_example(folder: Path, line: dict, max_pixels: int = MAX_IMAGE_PIXELS) -> Example:
    """The example of one line, media loaded; SkipItem / KeyError / ValueError when it cannot be."""
    messages = load_messages(line["messages"], folder, max_pixels)
    return Example(messages, line["answer"], line["task"], dict(line["meta"]), uid=line["uid"])


class _Batches(IterableDataset):
    """Batches of examples read from disk; with workers, batch ``b`` comes from worker ``b % K`` (in
    order)."""

    def __init__(self, folders: dict[str, Path], records: list[tuple[str, dict]], batch_size: int, max_pixels: int):
        self.folders = folders
        self.records = records
        self.batch_size = batch_size
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return -(-len(self.records) // self.batch_size)

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for b in range(worker, len(self), workers):
            chunk = self.records[b * self.batch_size : (b + 1) * self.batch_size]
            yield [to_example(self.folders[name], line, self.max_pixels) for name, line in chunk]
