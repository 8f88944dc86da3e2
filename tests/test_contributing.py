"""docs/contributing.md's worked examples stay true: every file the page names is written into a
copy of the packages (or appended to the file it names), with no other change, and the contract
tests and two GRPO steps pick the new classes and the new loss up.

Slow for this suite (two subprocesses: about 40 s of CPU, 100 s wall at load 7 on 2 cores); it is
the test that "a new task, source or policy family is one new file, a loss one function" is true.
"""

import csv
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "contributing.md"
#: A fenced block whose first line names the file it is (``# tasks/image/mirror.py``) or the
#: existing file it is appended to (``# + zoo/grpo/functional.py``).
FILE_BLOCK = re.compile(r"```(?:python|yaml)\n# (?P<append>\+ )?(?P<path>[\w/.]+)\n(?P<body>.*?)```", re.DOTALL)
PACKAGES = ("tasks", "datamodules", "zoo", "callbacks", "tests", "configs")


def page_files(appended: bool = False) -> dict[str, str]:
    """The page's new files, or with ``appended`` the code it appends to existing files, by path."""
    return {m["path"]: m["body"] for m in FILE_BLOCK.finditer(PAGE.read_text()) if bool(m["append"]) == appended}


def test_each_extension_is_one_new_file_or_one_appended_function():
    new, appended = page_files(), page_files(appended=True)
    sources = [path for path in new if path.endswith(".py") and not path.startswith("tests/")]
    assert sorted(sources) == [
        "datamodules/sources/heatmaps.py",
        "datamodules/sources/numpy_images.py",
        "tasks/heatmap/__init__.py",
        "tasks/heatmap/hottest_quadrant.py",
        "tasks/image/mirror.py",
        "zoo/llava.py",
        "zoo/rollout/native.py",
    ]
    assert not [path for path in new if (ROOT / path).exists()], "the examples are new files, not edits"
    assert list(appended) == ["zoo/grpo/functional.py"] and appended["zoo/grpo/functional.py"].count("\ndef ") == 1


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the checkout's packages with the page's files added, and the images the config
    reads."""
    root = tmp_path_factory.mktemp("contributing")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "pyproject.toml"):
        shutil.copy(ROOT / name, root / name)
    for path, body in page_files().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)  # a new modality is a new folder
        (root / path).write_text(body)
    for path, body in page_files(appended=True).items():
        (root / path).write_text(f"{(root / path).read_text()}\n\n{body}")
    from datamodules import SyntheticScenes

    scenes = SyntheticScenes(size=8, image_size=56)
    np.save(root / "images.npy", np.stack([np.asarray(scenes[i]) for i in range(len(scenes))]))
    return root


def run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=900)


def test_the_contract_tests_pick_up_the_new_task_and_policy(tree):
    """The contract tests of the new task and policy, the task's levels, ``tiny:llava``, the short
    names and the loss's own test."""
    result = run(
        tree,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/tasks/test_contract.py",
        "tests/zoo/test_policy_contract.py",
        "tests/test_pretext_bench.py",
        "tests/test_discovery.py",
        "tests/zoo/test_tiny.py",
        "tests/zoo/test_cispo.py",
        "-k",
        "Mirror or HottestQuadrant or LlavaPolicy or "
        "states_its_levels or short_name or tiny_checkpoint_is_a_family or cispo",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", result.stdout)[1])
    assert passed >= 30 and "failed" not in result.stdout, result.stdout[-500:]


def test_two_grpo_steps_on_the_new_policy_source_task_and_loss(tree):
    result = run(tree, "-m", "zoo", "fit", "--config", "mirror.yaml", "--trainer.enable_progress_bar", "false")
    assert result.returncode == 0, result.stderr[-3000:]
    (metrics,) = tree.glob("runs/lightning_logs/version_*/metrics.csv")
    rows = list(csv.DictReader(metrics.open()))
    assert any(row.get("train/reward/mirror/accuracy") for row in rows), rows[:2]


def test_two_grpo_steps_on_the_new_modality_with_the_new_engine(tree):
    result = run(
        tree,
        "-m",
        "zoo",
        "fit",
        "--config",
        "heatmap.yaml",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.default_root_dir",
        "heat",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (metrics,) = tree.glob("heat/lightning_logs/version_*/metrics.csv")
    rows = list(csv.DictReader(metrics.open()))
    assert any(row.get("train/reward/hottest_quadrant/accuracy") for row in rows), rows[:2]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_the_examples_follow_the_house_style(tree):
    files = [path for path in [*page_files(), *page_files(appended=True)] if path.endswith(".py")]
    result = subprocess.run(["ruff", "check", *files], cwd=tree, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
