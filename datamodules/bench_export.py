"""Export the pretext benchmark: fixed-seed held-out examples of every task at every difficulty
level (each task class's ``levels``), written to disk with their media and a manifest, so a score on
them is reproducible.

Layout of the output folder::

    manifest.json zoo version, seed, and per set: task class and arguments, source, counts
    <task>@<level>/examples.jsonl one example a line: uid, task, prompt, answer, meta, expected,
    messages <task>@<level>/media/... the media the messages name (see `datamodules.bench_files`)

The same (seed, task, level, source, zoo version) writes byte-identical files.
"""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from datamodules.base import PretextDataModule
from datamodules.bench_files import save_messages
from datamodules.sources.base import Source
from tasks import Example, Task
from tasks.base import level_id
from tasks.discovery import concrete_subclasses

FORMAT = "zoo-pretext-bench/1"
#: Offset added to the benchmark seed for the default synthetic sources: item families no config
#: trains on.
SOURCE_SEED = 1000
#: The default source of each modality: synthetic, so the benchmark builds offline anywhere.
DEFAULT_SOURCES: dict[str, tuple[str, dict]] = {
    "image": ("datamodules.SyntheticScenes", {"image_size": 112}),
    "video": ("datamodules.SyntheticVideos", {"num_frames": 24}),
    "rgbd": ("datamodules.SyntheticRGBD", {}),
    "point_cloud": ("datamodules.SyntheticPointClouds", {}),
    "audio": ("datamodules.SyntheticAudio", {}),
    "gui": ("datamodules.SyntheticGUI", {}),
    "frame_pair": ("datamodules.SyntheticGridWorld", {}),
}


def zoo_version() -> str:
    """The installed zoo's version (``unknown`` when running from a bare checkout)."""
    try:
        return metadata.version("zoo")
    except metadata.PackageNotFoundError:
        return "unknown"


def source_class(class_path: str) -> type[Source]:
    """The `Source` class of a class path; a short name means ``datamodules.<name>``."""
    path = class_path if "." in class_path else f"datamodules.{class_path}"
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, Source)):
        raise ValueError(f"{path} is not a datamodules Source class")
    return cls


def build_source(spec: dict) -> Source:
    """A source from ``{"class_path": ..., "init_args": {...}}``."""
    return source_class(spec["class_path"])(**spec.get("init_args", {}))


def default_source_spec(modality: str, seed: int) -> dict:
    """The default source of ``modality`` as a spec (see `build_source`), seeded from the benchmark
    seed."""
    if modality not in DEFAULT_SOURCES:
        raise ValueError(f"no default source for {modality} tasks; give one with --source")
    class_path, init_args = DEFAULT_SOURCES[modality]
    return {"class_path": class_path, "init_args": {**init_args, "seed": SOURCE_SEED + seed}}


def levelled_tasks() -> list[type[Task]]:
    """The task classes of `tasks` that have difficulty levels (the labelled-data tasks have
    none)."""
    return [cls for cls in concrete_subclasses(Task, "tasks") if cls.levels]


def select(tasks: Iterable[str] | None = None, levels: Iterable[str] | None = None) -> list[tuple[type[Task], str]]:
    """``(task class, level)`` pairs chosen by task names, class names or ``name@level`` ids (None:
    all) and by level names (None: all); ValueError for a name that selects nothing."""
    tasks, levels = list(tasks or []), list(levels or [])

    def keys(cls: type[Task], level: str) -> set[str]:
        return {cls.name, cls.__name__, level_id(cls.name, level)}

    every = [(cls, level) for cls in levelled_tasks() for level in cls.levels]
    chosen = [(c, lv) for c, lv in every if (not tasks or keys(c, lv) & set(tasks)) and (not levels or lv in levels)]
    unknown = [t for t in tasks if not any(t in keys(c, lv) for c, lv in chosen)]
    unknown += [lv for lv in levels if all(lv != level for _, level in chosen)]
    if unknown or not chosen:
        raise ValueError(
            f"{unknown or 'this selection'} selects no task level; tasks: "
            f"{sorted(c.name for c in levelled_tasks())}, levels: {sorted({lv for _, lv in every})}"
        )
    return chosen


def export(
    out: str,
    pairs: list[tuple[type[Task], str]],
    n: int = 100,
    seed: int = 0,
    sources: dict[str, dict] | None = None,
    common: dict | None = None,
) -> Path:
    """Write ``n`` examples of each ``(task class, level)`` to ``out`` with a manifest; returns the
    manifest.

    Args:
        out: Output folder (created; sets already there are replaced).
        pairs: The task levels, from `select`.
        n: Examples per level.
        seed: Selects the examples (and, for default sources, the items).
        sources: Source spec per modality (see `build_source`); other modalities use
            `DEFAULT_SOURCES`.
        common: Arguments every task gets (answer format options).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    unused = sorted(set(sources or {}) - {cls.modality for cls, _ in pairs})
    if unused:
        raise ValueError(f"sources are given for {unused} items, which no chosen task takes")
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    specs = dict(sources or {})
    built = {}
    sets = {}
    for cls, level in pairs:
        if cls.modality not in built:
            specs.setdefault(cls.modality, default_source_spec(cls.modality, seed))
            built[cls.modality] = build_source(specs[cls.modality])
        spec = specs[cls.modality]
        arguments = cls.level_arguments(level, **(common or {}))
        name = level_id(cls.name, level)
        sets[name] = {
            "task": {"class_path": f"{cls.__module__}.{cls.__qualname__}", "init_args": arguments},
            "level": level,
            "source": spec,
            **export_set(cls(**arguments), name, built[cls.modality], n, seed, root / name),
        }
    manifest = {"format": FORMAT, "zoo_version": zoo_version(), "seed": seed, "examples_per_set": n, "sets": sets}
    path = root / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path


def export_set(task: Task, name: str, source: Source, n: int, seed: int, folder: Path) -> dict:
    """Write the examples of one task level to ``folder``; returns its counts and the content kinds
    it holds."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    data = held_out(task, source, n, seed)
    kinds = set()
    count = 0
    with open(folder / "examples.jsonl", "w", encoding="utf-8") as f:
        for example in (ex for batch in data.val_dataloader() for ex in batch):
            if count == n:
                break
            kinds |= {
                part["type"] for m in example.messages if not isinstance(m["content"], str) for part in m["content"]
            }
            f.write(json.dumps(record(task, example, name, count, folder), sort_keys=True) + "\n")
            count += 1
    skipped = {kind: k for (_, kind), k in sorted(data.skip_counts.items())}
    return {"examples": count, "skipped": skipped, "content": sorted(kinds | {"text"})}


def held_out(task: Task, source: Source, n: int, seed: int) -> PretextDataModule:
    """A data module whose validation set starts with the ``n`` benchmark examples of ``task`` on
    ``source``: example ``i`` is a pure function of ``(seed, i)`` and item ``i`` of the source (an
    unusable item is skipped and replaced). A task that pairs items (`tasks.Contrastive`) draws its
    partners among the first ``n`` items (at least two), so its examples depend on ``n`` too."""
    pool = max(n, 1 + task.partners)
    return PretextDataModule(source, task, batch_size=min(pool, 16), val_source=source, val_size=pool, seed=seed)


def record(task: Task, example: Example, name: str, index: int, folder: Path) -> dict:
    """One line of ``examples.jsonl``: the example under its level id, media saved under
    ``folder``."""
    stem = f"{index:06d}"
    return {
        "uid": f"{name}:{index}",
        "task": name,
        "prompt": example.prompt_text,
        "answer": example.answer,
        "meta": example.meta,
        "expected": task.answer_text(example),
        "messages": save_messages(example.messages, folder, stem),
    }
