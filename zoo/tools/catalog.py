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
    """Table rows per section (the classes of `found`, in its order; the tiny models of
    `tiny_models`)."""
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
    for section in ("data modules", "strategies", "callbacks"):
        table[section] = [(_path(cls), _extras(cls, extras)) for cls in classes[section]]
    table["tiny models"] = [(name, _path(policy), kind) for name, policy, kind, _ in tiny_models()]
    return table


def tiny_models() -> list[tuple[str, type, str, str]]:
    """Every ``tiny:<family>`` (random-init, and the trained bases of `zoo.tiny.TRAINED`):
    ``(checkpoint, policy class that loads it, kind, description)``."""
    from zoo import tiny

    modules = {name: module for module in tiny._family_modules() for name in module.TINY}
    policies = {name: _policy_of(name, module) for name, module in modules.items()}
    out = []
    for name, spec in sorted(tiny.families().items()):
        doc = _first_sentence(" ".join((inspect.getdoc(spec.make) or "").split()))
        out.append((f"tiny:{name}", policies[name], "random init", doc or f"A random-init {name} (offline, tiny)."))
    for name, spec in sorted(tiny.TRAINED.items()):
        base = max((family for family in modules if name.startswith(family)), key=len)
        kind = f"trained: build once with `{spec.command}`"
        out.append((f"tiny:{name}", policies[base], kind, f"The tiny {base} after {spec.steps} training steps."))
    return out


def _policy_of(name: str, module) -> type:
    """The first policy that lists ``tiny:<name>`` among its ``tiny_checkpoints``, else the concrete
    policy class of the family's module."""
    models = found()["models"]
    listed = [cls for cls in models if f"tiny:{name}" in cls.tiny_checkpoints]
    return (listed or [cls for cls in models if cls.__module__ == module.__name__])[0]


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
    "data modules": ("class_path", "extras"),
    "strategies": ("class_path", "extras"),
    "callbacks": ("class_path", "extras"),
    "tiny models": ("pretrained", "policy", "weights"),
}
#: Where an entry of each section goes in a ``zoo fit`` configuration.
CONFIG_KEYS = {
    "models": "model",
    "tasks": "data.init_args.tasks",
    "sources": "data.init_args.source",
    "data modules": "data",
    "strategies": "trainer.strategy",
    "callbacks": "trainer.callbacks",
    "tiny models": "model",
}
Section = Literal["models", "tasks", "sources", "data modules", "strategies", "callbacks", "tiny models"]


def list_catalog(section: Section | None = None) -> None:
    """Every model, task, source, data module, strategy, callback and tiny model of this install:
    what it is, the extras it needs, and how a config names it.

    Args:
        section: Print only this section.
    """
    print_catalog(sections=None if section is None else [section])


def print_catalog(file=None, sections: list[str] | None = None) -> None:
    """Print one aligned table per section (to stdout by default); under each row, the class's
    one-line description and the configuration snippet that selects it (required arguments as
    ``<placeholders>``)."""
    file = file or sys.stdout
    entries = entries_by_section()
    for section, body in rows().items():
        if sections is not None and section not in sections:
            continue
        table = [HEADERS[section], *body]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        print(f"{section}:", file=file)
        print("  " + "  ".join(c.ljust(w) for c, w in zip(table[0], widths, strict=True)).rstrip(), file=file)
        for row, (text, value) in zip(body, entries[section], strict=True):
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=file)
            print(f"      {text}", file=file)
            print(f"      {CONFIG_KEYS[section]}: {value}", file=file)
        print(file=file)


def entries_by_section() -> dict[str, list[tuple[str, str]]]:
    """``(one-line description, configuration snippet)`` of every row of `rows`, per section."""
    out = {section: [(description(cls), snippet(cls)) for cls in classes] for section, classes in found().items()}
    out["tiny models"] = [
        (text, f"{{class_path: {_short_path(policy)}, init_args: {{pretrained: {json.dumps(name)}}}}}")
        for name, policy, _, text in tiny_models()
    ]
    return out


def found() -> dict[str, list[type]]:
    """The classes of each section, in the order of `rows`."""
    from lightning.pytorch import Callback, LightningDataModule
    from lightning.pytorch.strategies import Strategy

    from datamodules.sources.base import Source
    from tasks import Task
    from tasks.discovery import discover
    from zoo.policy import PolicyModule

    return {
        "models": discover("zoo", PolicyModule),
        "tasks": discover("tasks", Task),
        "sources": discover("datamodules", Source),
        "data modules": discover("datamodules", LightningDataModule),
        "strategies": discover("zoo", Strategy),
        "callbacks": discover("callbacks", Callback),
    }


def description(cls: type) -> str:
    """The first sentence of the class's docstring, on one line (whole: a ``:`` or ``;`` does not
    end it)."""
    return _first_sentence(" ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())) or "(no description)"


def _first_sentence(paragraph: str) -> str:
    """Up to the first full stop followed by a capital letter, or the whole paragraph (so
    ``e.g.`` and ``zoo.x`` do not end a sentence)."""
    sentence = re.match(r"(.+?\.)\s+(?=[A-Z`])", paragraph)
    return sentence[1] if sentence else paragraph


def snippet(cls: type) -> str:
    """A one-line YAML value selecting ``cls``: its shortest import path, and its required arguments
    (a tiny checkpoint for a model's ``pretrained``, else ``<name>`` placeholders)."""
    path = _short_path(cls)
    tiny = list(getattr(cls, "tiny_checkpoints", ()))
    required = {name: tiny[0] if name == "pretrained" and tiny else f"<{name}>" for name in _required(cls)}
    if not required:
        return f"{{class_path: {path}}}"
    shown = ", ".join(f"{name}: {json.dumps(value)}" for name, value in required.items())
    return f"{{class_path: {path}, init_args: {{{shown}}}}}"


def _short_path(cls: type) -> str:
    """``<package>.<name>`` where the package exports ``cls``, else its full import path."""
    package = cls.__module__.split(".")[0]
    short = f"{package}.{cls.__name__}"
    return short if getattr(importlib.import_module(package), cls.__name__, None) is cls else _path(cls)


def _required(cls: type) -> list[str]:
    """Parameters without a default of the first ``__init__`` along the MRO that declares any."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [
        p.name
        for p in parameters
        if p.name != "self" and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
