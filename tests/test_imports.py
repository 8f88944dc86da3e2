"""The packages import from this checkout, and imports point one way (DESIGN.md, dependency rules)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("zoo", "tasks", "datamodules", "callbacks")


@pytest.mark.parametrize("name", PACKAGES)
def test_package_imports_from_this_repo(name):
    module = __import__(name)
    assert Path(module.__file__).resolve().is_relative_to(ROOT / name)


@pytest.mark.parametrize("package, blocked", [
    ("tasks", ("zoo", "datamodules", "callbacks", "lightning", "pytorch_lightning")),
    ("datamodules", ("zoo", "callbacks")),
])
def test_package_imports_with_the_others_blocked(package, blocked):
    block = "; ".join(f"sys.modules[{name!r}] = None" for name in blocked)
    code = f"import sys; {block}; import {package}, pkgutil, importlib\n" \
           f"for m in pkgutil.walk_packages({package}.__path__, '{package}.'): importlib.import_module(m.name)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("name", ["functional.py", "logprobs.py"])
def test_grpo_math_imports_nothing_from_the_project(name):
    tree = ast.parse((ROOT / "zoo" / "grpo" / name).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported - {"torch"} <= set(sys.stdlib_module_names), imported  # torch and the standard library


def test_nothing_imports_callbacks_but_the_cli():
    for path in [*ROOT.glob("zoo/**/*.py"), *ROOT.glob("tasks/**/*.py"), *ROOT.glob("datamodules/**/*.py")]:
        if path.name == "cli.py":
            continue
        tree = ast.parse(path.read_text())
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not any(n == "callbacks" or n.startswith("callbacks.") for n in names), path
