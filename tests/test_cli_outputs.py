"""Where `zoo fit` writes and what it shows: everything under ``--trainer.default_root_dir``, the
final weights always checkpointed (``--ckpt_path last`` finds them), the run directory named at the
start, a progress line in steps; validation scheduling that works on a folder smaller than
``val_check_interval``; a discoverable ``zoo``."""

import csv
import json
import logging
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from zoo.cli import COMMANDS, TRAINER_COMMANDS, command, main, summary

ROOT = Path(__file__).parents[1]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
SMALL = [
    "--data.init_args.batch_size",
    "2",
    "--trainer.strategy.init_args.num_generations",
    "2",
    "--data.init_args.val_size",
    "4",
]


@pytest.fixture(scope="module")
def three_steps(tmp_path_factory):
    """``zoo fit ... --trainer.default_root_dir D --trainer.max_steps 3``: no validation is due at
    step 3. The logs are capped: 2 prediction rows per evaluation, 1000 bytes of rollouts."""
    cwd = tmp_path_factory.mktemp("three_steps")
    out = run(
        cwd,
        "fit",
        "--config",
        QUICKSTART,
        *SMALL,
        "--trainer.default_root_dir",
        "D",
        "--trainer.max_steps",
        "3",
        "--predictions.max_rows",
        "2",
        "--rollouts.max_bytes",
        "1000",
    )
    return cwd, out


def run(cwd: Path, *args: str) -> str:
    """``zoo <args>`` in-process in ``cwd``; everything it printed (stdout, stderr and the log)."""
    previous, logger = os.getcwd(), logging.getLogger("lightning.pytorch")
    os.chdir(cwd)
    with open(cwd / "out.txt", "w") as out:
        handler = logging.StreamHandler(out)
        logger.addHandler(handler)
        try:
            with _redirect(out):
                main(list(args))
        finally:
            logger.removeHandler(handler)
            os.chdir(previous)
    return (cwd / "out.txt").read_text()


class _redirect:
    """Send sys.stdout and sys.stderr (tqdm, prints, warnings) to ``file`` for a while."""

    def __init__(self, file):
        self.file, self.saved = file, None

    def __enter__(self):
        self.saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = self.file

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.saved


def test_logs_and_the_final_checkpoint_go_under_default_root_dir(three_steps):
    cwd, out = three_steps
    version = cwd / "D" / "lightning_logs" / "version_0"
    assert {"config.yaml", "metrics.csv", "rollouts.jsonl", "predictions.jsonl", "checkpoints"} <= {
        p.name for p in version.iterdir()
    }
    assert not (cwd / "runs").exists() and not (cwd / "lightning_logs").exists()
    (ckpt,) = (version / "checkpoints").iterdir()  # the final weights, though no validation saved them
    assert ckpt.name == "epoch=0-step=3.ckpt" and torch.load(ckpt, weights_only=True)["global_step"] == 3
    with open(version / "metrics.csv") as f:
        assert "val/accuracy" in next(csv.reader(f))
    assert f"[zoo] fit: this run writes to D{'/'}lightning_logs/version_0" in out
    assert out.index("this run writes to") < out.index("val accuracy at start")  # named at the start


def test_the_logs_keep_to_their_caps(three_steps):
    cwd, _ = three_steps
    version = cwd / "D" / "lightning_logs" / "version_0"
    predictions = [json.loads(line) for line in (version / "predictions.jsonl").read_text().splitlines()]
    assert [row["uid"] for row in predictions] == ["0:val:0:0", "0:val:0:1"]  # of 4 validation examples
    rollouts = (version / "rollouts.jsonl").read_text().splitlines()
    assert 1 <= len(rollouts) < 8 and (version / "rollouts.jsonl").stat().st_size <= 1000  # of 4 train + 4 val rows


def test_the_progress_line_counts_steps_and_shows_reward(three_steps):
    _, out = three_steps
    assert re.search(r"step: 100%\S* *\|[^|]*\| 3/3 \[.*reward=", out), out[-2000:]
    assert "v_num" not in out and not re.search(r"Epoch \d+", out)


def test_ckpt_path_last_finds_the_final_checkpoint(three_steps):
    cwd, _ = three_steps
    run(cwd, "validate", "--config", QUICKSTART, *SMALL, "--trainer.default_root_dir", "D", "--ckpt_path", "last")
    results = json.loads((cwd / "D" / "lightning_logs" / "version_1" / "metrics.json").read_text())
    assert results["at"].endswith("version_0/checkpoints/epoch=0-step=3.ckpt")


def test_a_folder_smaller_than_the_validation_interval_trains_by_default(tmp_path):
    """10 training images, 5 batches an epoch, validation every 6 steps: Lightning's default
    scheduling stops after the first epoch; zoo's counts the steps across epochs."""
    for i in range(12):
        pixels = np.random.default_rng(i).integers(0, 255, (32, 32, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
    out = run(
        tmp_path,
        "fit",
        "--config",
        QUICKSTART,
        *SMALL[:4],
        "--data.init_args.source",
        "datamodules.ImageFolder",
        "--data.init_args.source.init_args.root",
        str(tmp_path),
        "--data.init_args.val_size",
        "2",
        "--data.init_args.test_size",
        "0",
        "--trainer.max_steps",
        "7",
        "--trainer.val_check_interval",
        "6",
        "--validate_before_fit",
        "false",
    )
    assert "val accuracy at step 6" in out and "`max_steps=7` reached" in out
    (ckpt,) = (tmp_path / "runs" / "lightning_logs" / "version_0" / "checkpoints").iterdir()
    assert ckpt.name == "epoch=1-step=7.ckpt"


def test_zoo_help_lists_every_command_with_its_description(capsys):
    main(["--help"])
    out = capsys.readouterr().out
    for name in COMMANDS:
        text = summary(command(name))
        assert len(text) > 20 and re.search(rf"^  {re.escape(name)} +{re.escape(text)}$", out, re.M)
    for name, text in TRAINER_COMMANDS.items():
        assert re.search(rf"^  {name} +{re.escape(text)}$", out, re.M)
    assert re.search(r"^  bench +Renamed: zoo speed", out, re.M)  # an old name says where it went
    assert "A run writes to <trainer.default_root_dir, default runs>/lightning_logs/version_<n>/" in out


def test_fit_help_says_where_a_run_writes(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert exit_info.value.code == 0 and TRAINER_COMMANDS["fit"] in out and "A run writes to" in out
    assert "--trainer.default_root_dir" in out and "lightning_logs/version_<n>/" in out


def tool_commands() -> list[tuple[list[str], object]]:
    """``[name]`` or ``[name, sub-command]`` of every tool, and the typed component it runs."""
    found = []
    for name in sorted(COMMANDS):
        component = command(name)
        subs = {k: v for k, v in component.items() if k != "_help"} if isinstance(component, dict) else {}
        found += [([name, sub], f) for sub, f in subs.items()] if subs else [([name], component)]
    return found


@pytest.mark.parametrize("argv, component", tool_commands(), ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_every_tool_has_help_from_its_docstrings(argv, component, capsys):
    """Each tool's options come from its typed signature, their help from the docstring's
    ``Args:``."""
    import docstring_parser

    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert exit_info.value.code == 0 and out.startswith(f"usage: zoo {argv[0]}")
    documented = docstring_parser.parse(component.__doc__ or "").params
    for parameter in documented:
        if parameter.arg_name != "fit_args":
            assert f"--{parameter.arg_name}" in out or parameter.arg_name in out.split("positional arguments")[0]
        assert " ".join(parameter.description.split()) in out
