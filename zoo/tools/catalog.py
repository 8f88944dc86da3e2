"""``zoo list``: the policies, tasks and sources this install has, found by importing the packages
(a new file shows up with no edit here), with the ``pip install 'zoo[<extra>]'`` extras each one
needs."""

from __future__ import annotations

import ast
import configparser
import importlib
import inspect
import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[2]


def extras_requirements() -> dict[str, set[str]]:
    """Extra name -> normalised distribution names it installs (setup.cfg of a checkout, else
    metadata)."""
    pattern = re.compile(r"^\s*([A-Za-z0-9_.\-]+)")
    setup_cfg = ROOT / "setup.cfg"
    out: dict[str, set[str]] = {}
    if setup_cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(setup_cfg)
        section = parser["options.extras_require"] if parser.has_section("options.extras_require") else {}
        for extra, body in section.items():
            names = {m[1] for line in body.splitlines() if (m := pattern.match(line)) and "%(" not in line}
            out[extra] = {_normalise(n) for n in names}
        return out
    for requirement in metadata.requires("zoo") or []:
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)", requirement)
        if extra and (m := pattern.match(requirement)):
            out.setdefault(extra[1], set()).add(_normalise(m[1]))
    return out


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def imported_packages(cls: type) -> set[str]:
    """Top-level names imported anywhere (also inside functions, and through `tasks.extras.require`)
    by the modules defining ``cls`` and its project base classes."""
    names = set()
    project = cls.__module__.split(".")[0]
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] != project:
            continue
        tree = ast.parse(Path(inspect.getfile(klass)).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
            elif _requires(node):  # tasks.extras.require("open3d", "3d", ...)
                names.add(node.args[0].value.split(".")[0])
    return names


def _requires(node: ast.AST) -> bool:
    """A ``require("<module>", ...)`` call: an optional import made through
    `tasks.extras.require`."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    return func == "require" and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def extras_needed(cls: type, extras: dict[str, set[str]]) -> list[str]:
    """The extras whose distributions provide a package ``cls``'s code imports (``dev`` and other
    bundles of extras left out)."""
    imported = {_normalise(n) for n in imported_packages(cls)}
    needed = set()
    for extra, dists in extras.items():
        if extra == "dev":
            continue
        if any(d == i or d.startswith(i + "_") for d in dists for i in imported):
            needed.add(extra)
    return sorted(needed)


def rows() -> dict[str, list[tuple[str, ...]]]:
    """Table rows per section: models, tasks, sources (the classes of `found`, in its order)."""
    from tasks import answers

    extras = extras_requirements()
    classes = found()
    table: dict[str, list[tuple[str, ...]]] = {"models": [], "tasks": [], "sources": []}
    for cls in classes["models"]:
        table["models"].append(
            (_path(cls), ",".join(sorted(cls.content_kinds)), " ".join(cls.tiny_checkpoints), _extras(cls, extras))
        )
    for cls in classes["tasks"]:
        default = _default(cls, "answer_format")
        formats = "/".join(f"{f}*" if f == default else f for f in answers.FORMATS)
        table["tasks"].append((_path(cls), cls.name, cls.modality, formats, _extras(cls, extras)))
    for cls in classes["sources"]:
        table["sources"].append((_path(cls), cls.modality, _extras(cls, extras)))
    return table


def _default(cls: type, argument: str):
    """The default of ``argument`` in the first ``__init__`` along the MRO that declares it."""
    for klass in cls.__mro__:
        parameter = inspect.signature(klass.__init__).parameters.get(argument)
        if parameter is not None:
            return parameter.default
    return None


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _extras(cls: type, extras: dict[str, set[str]]) -> str:
    return ",".join(extras_needed(cls, extras)) or "-"


HEADERS = {
    "models": ("class_path", "modalities", "tiny checkpoints", "extras"),
    "tasks": ("class_path", "name", "modality", "answer formats (* default)", "extras"),
    "sources": ("class_path", "modality", "extras"),
}
#: Where a class of each section goes in a ``zoo fit`` configuration.
CONFIG_KEYS = {"models": "model", "tasks": "data.init_args.tasks", "sources": "data.init_args.source"}
Section = Literal["models", "tasks", "sources"]


def list_catalog(section: Section | None = None) -> None:
    """Every model, task and source of this install: what it is, the extras it needs, and how a
    config names it.

    Args:
        section: Print only this section.
    """
    print_catalog(sections=None if section is None else [section])


def print_catalog(file=None, sections: list[str] | None = None) -> None:
    """Print one aligned table per section (to stdout by default); under each row, the class's
    one-line description and the configuration snippet that selects it (required arguments as
    ``<placeholders>``)."""
    file = file or sys.stdout
    classes = found()
    for section, body in rows().items():
        if sections is not None and section not in sections:
            continue
        table = [HEADERS[section], *body]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        print(f"{section}:", file=file)
        print("  " + "  ".join(c.ljust(w) for c, w in zip(table[0], widths, strict=True)).rstrip(), file=file)
        for row, cls in zip(body, classes[section], strict=True):
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=file)
            print(f"      {description(cls)}", file=file)
            print(f"      {CONFIG_KEYS[section]}: {snippet(cls)}", file=file)
        print(file=file)


def found() -> dict[str, list[type]]:
    """The classes of each section, in the order of `rows`."""
    from datamodules.sources.base import Source
    from tasks import Task
    from tasks.discovery import discover
    from zoo.policy import PolicyModule

    return {
        "models": discover("zoo", PolicyModule),
        "tasks": discover("tasks", Task),
        "sources": discover("datamodules", Source),
    }


def description(cls: type) -> str:
    """The first sentence of the class's docstring, on one line."""
    paragraph = " ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())
    sentence = re.match(r"(.+?[.:;])(?:\s|$)", paragraph)
    return (sentence[1] if sentence else paragraph) or "(no description)"


def snippet(cls: type) -> str:
    """A one-line YAML value selecting ``cls``: its shortest import path, and its required arguments
    (a tiny checkpoint for a model's ``pretrained``, else ``<name>`` placeholders)."""
    package = cls.__module__.split(".")[0]
    short = f"{package}.{cls.__name__}"
    path = short if getattr(importlib.import_module(package), cls.__name__, None) is cls else _path(cls)
    tiny = list(getattr(cls, "tiny_checkpoints", ()))
    required = {name: tiny[0] if name == "pretrained" and tiny else f"<{name}>" for name in _required(cls)}
    if not required:
        return f"{{class_path: {path}}}"
    shown = ", ".join(f"{name}: {json.dumps(value)}" for name, value in required.items())
    return f"{{class_path: {path}, init_args: {{{shown}}}}}"


def _required(cls: type) -> list[str]:
    """Parameters without a default of the first ``__init__`` along the MRO that declares any."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [
        p.name
        for p in parameters
        if p.name != "self" and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
