"""Untrusted inputs: model output and data files are never executed, remote code is opt-in,
checkpoints load without pickled code, and nothing reaches the network at import time."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SOURCES = sorted(p for pkg in ("zoo", "tasks", "datamodules", "callbacks") for p in (ROOT / pkg).rglob("*.py"))


def calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            yield _dotted(node.func), {k.arg: k.value for k in node.keywords}, node.lineno


def _dotted(func: ast.expr) -> str:
    """``eval`` for a bare name, ``torch.load`` for a module attribute, ``?.eval`` for a method
    call."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{func.value.id if isinstance(func.value, ast.Name) else '?'}.{func.attr}"
    return "?"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_execution_from_data(path):
    for name, keywords, line in calls(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        assert name not in {"eval", "exec", "compile", "pickle.load", "pickle.loads", "yaml.load", "os.system"}, where
        if name == "torch.load":
            value = keywords.get("weights_only")
            assert isinstance(value, ast.Constant) and value.value is True, f"{where}: weights_only=True"
        if "trust_remote_code" in keywords:
            value = keywords["trust_remote_code"]
            assert not (isinstance(value, ast.Constant) and value.value is True), f"{where}: opt-in only"
        assert not (isinstance(keywords.get("shell"), ast.Constant) and keywords["shell"].value), where


def test_nothing_reaches_the_network_at_import():
    guard = (
        "import socket\n"
        "def refuse(*a, **k): raise SystemExit('network access at import: %r' % (a,))\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
    )
    imports = (
        "import zoo, zoo.cli, tasks, datamodules, callbacks, pkgutil, importlib\n"
        "for pkg in (zoo, tasks, datamodules, callbacks):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'): importlib.import_module(m.name)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    result = subprocess.run(
        [sys.executable, "-c", guard + imports], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
