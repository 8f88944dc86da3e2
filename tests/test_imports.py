"""The packages import from this checkout, and imports point one way (DESIGN.md, dependency
rules)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_graph import core_to_tools, cycles, import_graph

ROOT = Path(__file__).parents[1]
PACKAGES = ("zoo", "tasks", "datamodules", "callbacks")


@pytest.mark.parametrize("name", PACKAGES)
def test_package_imports_from_this_repo(name):
    module = __import__(name)
    assert Path(module.__file__).resolve().is_relative_to(ROOT / name)


@pytest.mark.parametrize(
    "package, blocked",
    [
        ("tasks", ("zoo", "datamodules", "callbacks", "lightning", "pytorch_lightning")),
        ("datamodules", ("zoo", "callbacks")),
    ],
)
def test_package_imports_with_the_others_blocked(package, blocked):
    block = "; ".join(f"sys.modules[{name!r}] = None" for name in blocked)
    code = (
        f"import sys; {block}; import {package}, pkgutil, importlib\n"
        f"for m in pkgutil.walk_packages({package}.__path__, '{package}.'): importlib.import_module(m.name)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("name", ["grpo/functional.py", "rollout/logprobs.py"])
def test_grpo_math_imports_nothing_from_the_project(name):
    tree = ast.parse((ROOT / "zoo" / name).read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported - {"torch"} <= set(sys.stdlib_module_names), imported  # torch and the standard library


def test_nothing_imports_callbacks_but_the_cli():
    for path in [*ROOT.glob("zoo/**/*.py"), *ROOT.glob("tasks/**/*.py"), *ROOT.glob("datamodules/**/*.py")]:
        if path.name == "cli.py":
            continue
        tree = ast.parse(path.read_text())
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not any(n == "callbacks" or n.startswith("callbacks.") for n in names), path


def test_no_package_has_an_import_cycle():
    found = cycles(import_graph(ROOT, PACKAGES))
    assert not found, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_the_core_never_imports_the_tools():
    """`zoo/tools` holds side commands over the core; only the composition root (the CLI) names
    them."""
    edges = core_to_tools(import_graph(ROOT, PACKAGES))
    assert not edges, edges


def test_a_planted_cycle_is_found_and_named(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg import a\n")  # a package re-export is not an edge
    (package / "a.py").write_text("import os\nfrom pkg.sub.b import helper\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def helper():\n    from pkg import c\n")  # inside a function too
    (package / "c.py").write_text("from . import a\n")  # relative
    (package / "d.py").write_text("from pkg.a import x\n")  # imports into the cycle, not part of it
    graph = import_graph(tmp_path, ("pkg",))
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]
    (package / "c.py").write_text("import pkg.sub\n")  # now only the package: no cycle
    assert cycles(import_graph(tmp_path, ("pkg",))) == []


def test_a_planted_tools_import_is_found(tmp_path):
    (tmp_path / "zoo" / "tools").mkdir(parents=True)
    (tmp_path / "zoo" / "tools" / "export.py").write_text("")
    (tmp_path / "zoo" / "policy.py").write_text("def load():\n    from zoo.tools.export import export\n")
    (tmp_path / "zoo" / "cli.py").write_text("from zoo.tools.export import export\n")  # the root may
    assert core_to_tools(import_graph(tmp_path, ("zoo",))) == ["zoo.policy -> zoo.tools.export"]
