"""What the 2-process GRPO tests share: the quickstart with plain SGD (so a wrong share or
normaliser shows in the weights), a `zoo fit` subprocess that returns its final weights, and the
check that two runs made the same update and that it moved the weights."""

import os
import subprocess
import sys
from pathlib import Path

import torch

from zoo.checkpoints import read_checkpoint

ROOT = Path(__file__).parents[2]


def sgd_quickstart(tmp_path: Path) -> Path:
    """configs/quickstart.yaml with SGD at lr 1 in place of AdamW."""
    text = (ROOT / "configs" / "quickstart.yaml").read_text()
    old = "class_path: torch.optim.AdamW\n      init_args: {lr: 3.0e-4, betas: [0.9, 0.99], weight_decay: 0.0}"
    assert old in text
    config = tmp_path / "sgd.yaml"
    config.write_text(text.replace(old, "class_path: torch.optim.SGD\n      init_args: {lr: 1.0}"))
    return config


def fit_weights(config: Path, cwd: Path, args: list[str]) -> tuple[dict, str]:
    """The state dict of the one checkpoint a `zoo fit` of ``config`` with ``args`` writes in
    ``cwd``, and that checkpoint's file name."""
    cwd.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "zoo", "fit", "--config", str(config), *args]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    (ckpt,) = cwd.glob("runs/lightning_logs/*/checkpoints/*.ckpt")
    return read_checkpoint(ckpt)["state_dict"], ckpt.name


def assert_same_update_that_trains(ddp: dict, fsdp: dict) -> None:
    """``fsdp`` holds ``ddp``'s weights, and those moved from the tiny model's seeded init."""
    assert set(fsdp) == set(ddp)
    for name, value in ddp.items():
        torch.testing.assert_close(fsdp[name].float(), value.float(), atol=1e-5, rtol=1e-4, msg=name)
    from zoo import QwenVLPolicy

    torch.manual_seed(0)
    initial = QwenVLPolicy("tiny:qwen2_5_vl")
    initial.configure_model()
    moved = [not torch.equal(initial.state_dict()[name], value) for name, value in ddp.items()]
    assert sum(moved) > len(moved) // 2
