"""``zoo pretext-bench``: export the fixed-seed pretext benchmark (every task at every difficulty
level) to a folder, or list the levels. Evaluate an export with ``zoo test --config
configs/eval/pretext_bench.yaml --data.init_args.path <folder>``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import yaml

from datamodules.bench_export import export, levelled_tasks, select, source_class


def parse_source(value: str) -> dict:
    """A ``--source`` value as a spec: a YAML/JSON file or inline mapping with ``class_path`` and
    ``init_args``, or a bare class name (``SyntheticScenes``) or path (``datamodules.ImageFolder``)
    built with its defaults."""
    path = Path(value).expanduser()
    spec = (
        yaml.safe_load(path.read_text())
        if path.is_file()
        else (yaml.safe_load(value) if value.lstrip().startswith("{") else {"class_path": value})
    )
    if not isinstance(spec, dict) or not isinstance(spec.get("class_path"), str):
        raise ValueError(f"--source {value!r}: need a class path or a mapping with class_path (and init_args)")
    return {"class_path": spec["class_path"], "init_args": dict(spec.get("init_args") or {})}


def levels_table() -> list[tuple[str, str, str]]:
    """``(task class, task name, levels with their arguments)`` rows."""

    def shown(args: dict) -> str:
        return ", ".join(f"{key}={json.dumps(value)}" for key, value in args.items()) or "defaults"

    return [
        (cls.__name__, cls.name, "; ".join(f"{level} ({shown(args)})" for level, args in cls.levels.items()))
        for cls in levelled_tasks()
    ]


def report(predictions: str) -> str:
    """A Markdown table of the mean reward parts per task level in a ``predictions.jsonl`` of ``zoo
    test`` (the last evaluation in the file when it holds several)."""
    rows = [json.loads(line) for line in Path(predictions).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{predictions} holds no predictions")
    last = [row for row in rows if (row["split"], row["at"]) == (rows[-1]["split"], rows[-1]["at"])]
    by_set: dict[str, list[dict]] = {}
    for row in last:
        by_set.setdefault(row["task"], []).append(row["parts"])
    lines = [
        f"{rows[-1]['split']} at {rows[-1]['at']}",
        "",
        "| task@level | n | accuracy | exact | format |",
        "|---|---|---|---|---|",
    ]
    for name, parts in sorted(by_set.items()):
        means = [_mean(parts, key) for key in ("accuracy", "exact", "format")]
        lines.append(f"| {name} | {len(parts)} | " + " | ".join(means) + " |")
    return "\n".join(lines)


def _mean(parts: list[dict], key: str) -> str:
    values = [p[key] for p in parts if key in p]
    return f"{sum(values) / len(values):.3f}" if values else "-"


def export_benchmark(
    *,
    out: str,
    tasks: list[str] | None = None,
    levels: list[str] | None = None,
    n: int = 100,
    seed: int = 0,
    source: list[str] | None = None,
    answer_format: Literal["tags", "boxed", "bare"] = "tags",
    think: bool = False,
) -> Path:
    """Write the benchmark's examples, media and manifest to a folder; returns the manifest's path.

    Args:
        out: The output folder.
        tasks: Task names, class names or ``name@level`` ids (None: every task).
        levels: Level names, e.g. ``[3x3, 6clips]`` (None: every level).
        n: Examples per task level.
        seed: Selects the examples and the default sources' items.
        source: Sources replacing the synthetic default of their modality, each a class name or
            path, an inline YAML/JSON ``{class_path: ..., init_args: {...}}``, or a YAML file of
            that.
        answer_format: How the prompts ask for the answer: ``tags``, ``boxed`` or ``bare``.
        think: Ask for ``<think>...</think>`` before the answer.
    """
    specs = [parse_source(value) for value in source or []]
    sources = {source_class(spec["class_path"]).modality: spec for spec in specs}
    manifest = export(
        out,
        select(tasks, levels),
        n=n,
        seed=seed,
        sources=sources,
        common={"answer_format": answer_format, "think": think},
    )
    print(f"[zoo] pretext benchmark written to {manifest.parent} (manifest {manifest})")
    return manifest


def print_levels() -> None:
    """Print every task's difficulty levels and their arguments."""
    for row in levels_table():
        print("  ".join(row))


def print_report(*, predictions: str) -> None:
    """Print a Markdown table of the scores per task level of a ``zoo test`` run on an export.

    Args:
        predictions: The ``predictions.jsonl`` that ``zoo test`` wrote.
    """
    print(report(predictions))


#: ``zoo pretext-bench <command>``.
COMMANDS = {
    "_help": "Export the fixed-seed pretext benchmark (every task at every level), list its levels, or "
    "report a zoo test run on it.",
    "export": export_benchmark,
    "levels": print_levels,
    "report": print_report,
}
