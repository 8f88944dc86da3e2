"""``zoo pretext-bench``: export the fixed-seed pretext benchmark (every task at every difficulty level) to a
folder, or list the levels. Evaluate an export with ``zoo test --config configs/eval/pretext_bench.yaml
--data.init_args.path <folder>``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from datamodules.bench_export import export, levelled_tasks, select, source_class


def parse_source(value: str) -> dict:
    """A ``--source`` value as a spec: a YAML/JSON file or inline mapping with ``class_path`` and ``init_args``,
    or a bare class name (``SyntheticScenes``) or path (``datamodules.ImageFolder``) built with its defaults."""
    path = Path(value).expanduser()
    spec = yaml.safe_load(path.read_text()) if path.is_file() else (
        yaml.safe_load(value) if value.lstrip().startswith("{") else {"class_path": value})
    if not isinstance(spec, dict) or not isinstance(spec.get("class_path"), str):
        raise ValueError(f"--source {value!r}: need a class path or a mapping with class_path (and init_args)")
    return {"class_path": spec["class_path"], "init_args": dict(spec.get("init_args") or {})}


def levels_table() -> list[tuple[str, str, str]]:
    """``(task class, task name, levels with their arguments)`` rows."""
    def shown(args: dict) -> str:
        return ", ".join(f"{key}={json.dumps(value)}" for key, value in args.items()) or "defaults"

    return [(cls.__name__, cls.name, "; ".join(f"{level} ({shown(args)})" for level, args in cls.levels.items()))
            for cls in levelled_tasks()]


def report(predictions: str) -> str:
    """A Markdown table of the mean reward parts per task level in a ``predictions.jsonl`` of ``zoo test``
    (the last evaluation in the file when it holds several)."""
    rows = [json.loads(line) for line in Path(predictions).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{predictions} holds no predictions")
    last = [row for row in rows if (row["split"], row["at"]) == (rows[-1]["split"], rows[-1]["at"])]
    by_set: dict[str, list[dict]] = {}
    for row in last:
        by_set.setdefault(row["task"], []).append(row["parts"])
    lines = [f"{rows[-1]['split']} at {rows[-1]['at']}", "", "| task@level | n | accuracy | exact | format |",
             "|---|---|---|---|---|"]
    for name, parts in sorted(by_set.items()):
        means = [_mean(parts, key) for key in ("accuracy", "exact", "format")]
        lines.append(f"| {name} | {len(parts)} | " + " | ".join(means) + " |")
    return "\n".join(lines)


def _mean(parts: list[dict], key: str) -> str:
    values = [p[key] for p in parts if key in p]
    return f"{sum(values) / len(values):.3f}" if values else "-"


def main(args: list[str]) -> None:
    """``zoo pretext-bench export --out DIR [...]``, ``zoo pretext-bench levels`` or ``zoo pretext-bench report
    --predictions FILE``."""
    parser = argparse.ArgumentParser(prog="zoo pretext-bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="write the benchmark examples, media and manifest to a folder")
    out.add_argument("--out", required=True, help="output folder")
    out.add_argument("--tasks", nargs="+", help="task names, class names or name@level ids (default: all)")
    out.add_argument("--levels", nargs="+", help="level names, e.g. 3x3 6clips (default: all)")
    out.add_argument("--n", type=int, default=100, help="examples per task level")
    out.add_argument("--seed", type=int, default=0, help="selects the examples and the default sources' items")
    out.add_argument("--source", action="append", default=[], type=parse_source,
                     help="a source for its modality instead of the synthetic default: class name or path, inline "
                          "YAML/JSON {class_path: ..., init_args: {...}}, or a YAML file of that; repeatable")
    out.add_argument("--answer-format", default="tags", choices=["tags", "boxed", "bare"])
    out.add_argument("--think", action="store_true", help="ask for <think>...</think> before the answer")
    commands.add_parser("levels", help="print every task's difficulty levels")
    scores = commands.add_parser("report", help="a Markdown table of the scores per task level of a zoo test run")
    scores.add_argument("--predictions", required=True, help="the predictions.jsonl a zoo test run wrote")
    options = parser.parse_args(args)
    if options.command == "report":
        print(report(options.predictions))
        return
    if options.command == "levels":
        for row in levels_table():
            print("  ".join(row))
        return
    sources = {source_class(spec["class_path"]).modality: spec for spec in options.source}
    common = {"answer_format": options.answer_format, "think": options.think}
    manifest = export(options.out, select(options.tasks, options.levels), n=options.n, seed=options.seed,
                      sources=sources, common=common)
    print(f"[zoo] pretext benchmark written to {manifest.parent} (manifest {manifest})")
