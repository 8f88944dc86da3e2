"""Docs pages kept true by the code: the settings tables in ``docs/*.md`` are generated from the
signatures and ``Args:`` docstrings that are also the ``--help`` text, so a setting is described
once, in its docstring.

A page marks each generated block::

    <!-- generated: settings zoo.grpo.GRPOMixin -->
    ...
    <!-- end generated -->

``python -m zoo.tools.docs`` rewrites every block in place; ``--check`` lists the stale ones and
exits 1 (a test runs it). Kinds: ``settings <class path>`` (the class's ``__init__`` arguments),
``levels`` (the pretext benchmark's task levels, `tasks.Task.levels`).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"(<!-- generated: (?P<spec>[^>]+?) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)
_ARG = re.compile(r"^(?P<name>\*{0,2}\w+)(?: \([^)]*\))?: (?P<text>.*)$")


def docstring_args(obj) -> dict[str, str]:
    """The ``Args:`` entries of a Google-style docstring, name -> text on one line (RST ````x```` as
    ```x```)."""
    doc = inspect.cleandoc(obj.__doc__ or "")
    section = re.search(r"^Args:\n(?P<body>(?:[ \t]+.*\n?|\n)+)", doc, re.MULTILINE)
    if not section:
        return {}
    entries: dict[str, list[str]] = {}
    for line in inspect.cleandoc(section["body"]).splitlines():
        match = _ARG.match(line)
        if match and not line[0].isspace():
            entries[match["name"]] = [match["text"]]
        elif entries and line.strip():
            entries[next(reversed(entries))].append(line.strip())
    return {name: " ".join(lines).replace("``", "`") for name, lines in entries.items()}


def _default(parameter: inspect.Parameter) -> str:
    if parameter.default is inspect.Parameter.empty:
        return "required"
    value = parameter.default
    if isinstance(value, str):
        return f"`{value}`"
    if callable(value):  # a class or function default (an optimizer factory): its shortest import path
        return f"`{_import_path(value)}`"
    return f"`{json.dumps(value)}`"  # as YAML writes it: null, true, 1.0, [0, 90]


def _import_path(value) -> str:
    """``torch.optim.AdamW`` rather than ``torch.optim.adamw.AdamW``: the shortest module that
    exports it."""
    parts = value.__module__.split(".")
    for end in range(1, len(parts) + 1):
        module = ".".join(parts[:end])
        if getattr(importlib.import_module(module), value.__qualname__, None) is value:
            return f"{module}.{value.__qualname__}"
    return f"{value.__module__}.{value.__qualname__}"


def settings_table(cls: type) -> str:
    """A Markdown table of ``cls.__init__``'s arguments: name, default, and the docstring's text for
    it."""
    described = docstring_args(cls)
    rows = ["| argument | default | meaning |", "|---|---|---|"]
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name not in described:
            raise ValueError(f"{cls.__qualname__}: argument {name!r} has no Args: entry in the docstring")
        rows.append(f"| `{name}` | {_default(parameter)} | {described[name].replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


def levels_table() -> str:
    """A Markdown table of every task's difficulty levels and the constructor arguments each
    sets."""
    from datamodules.bench_export import levelled_tasks

    rows = ["| task | levels (constructor arguments; the others keep their defaults) |", "|---|---|"]
    for cls in levelled_tasks():
        levels = "; ".join(f"`{level}` ({_arguments(args)})" for level, args in cls.levels.items())
        rows.append(f"| `{cls.name}` | {levels} |")
    return "\n".join(rows) + "\n"


def _arguments(args: dict) -> str:
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in args.items()) or "defaults"


def generate(spec: str) -> str:
    """The text of one block: ``settings <module.Class>`` or ``levels``."""
    kind, _, target = spec.partition(" ")
    if kind == "settings":
        module, _, name = target.rpartition(".")
        return settings_table(getattr(importlib.import_module(module), name))
    if kind == "levels" and not target:
        return levels_table()
    raise ValueError(f"unknown generated block {spec!r}: use 'settings <module.Class>' or 'levels'")


def render(text: str) -> str:
    """``text`` with every generated block rewritten."""
    return BLOCK.sub(lambda m: m[1] + generate(m["spec"].strip()) + m[4], text)


def pages(root: Path = ROOT) -> list[Path]:
    return sorted((root / "docs").glob("*.md"))


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated blocks of ``docs/*.md`` (``--check``: only list the stale pages; 1 if
    any)."""
    parser = argparse.ArgumentParser(prog="python -m zoo.tools.docs", description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a page is stale")
    options = parser.parse_args(argv)
    stale = [page for page in pages() if render(page.read_text()) != page.read_text()]
    for page in stale:
        print(f"{'stale' if options.check else 'rewrote'}: {page.relative_to(ROOT)}")
        if not options.check:
            page.write_text(render(page.read_text()))
    return 1 if stale and options.check else 0


if __name__ == "__main__":
    sys.exit(main())
