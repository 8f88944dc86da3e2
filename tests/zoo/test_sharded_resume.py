"""A sharded checkpoint written by 2 FSDP2 processes resumes on one process with the default
one-device strategy: read consolidated, it restores the weights and optimizer state the 2 processes
left, and training goes on from its step."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

from zoo.checkpoints import read_checkpoint
from zoo.cli import cli

ROOT = Path(__file__).parents[2]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
QUICK = [
    "--data.init_args.val_size",
    "2",
    "--data.init_args.batch_size",
    "2",
    "--trainer.strategy.init_args.num_generations",
    "2",
    "--trainer.strategy.init_args.entropy_coef",  # a gradient even when every reward is equal
    "0.05",
]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """The folder checkpoint of one GRPO step of the quickstart on 2 FSDP2 processes (gloo)."""
    cwd = tmp_path_factory.mktemp("fsdp2")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    two = ["--trainer.strategy", "zoo.grpo.GRPOFSDPStrategy", "--trainer.devices", "2"]
    result = subprocess.run(
        [sys.executable, "-m", "zoo", "fit", "--config", QUICKSTART, *two, *QUICK, "--trainer.max_steps", "1"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    (ckpt,) = cwd.glob("runs/lightning_logs/*/checkpoints/*.ckpt")
    assert (ckpt / ".metadata").is_file() and len(list(ckpt.glob("*.distcp"))) == 2
    return ckpt


class Restored(Callback):
    """What the run holds when training starts, after the checkpoint was restored."""

    def on_train_start(self, trainer, pl_module):
        self.step = trainer.global_step
        self.weights = {name: value.detach().clone() for name, value in pl_module.state_dict().items()}
        self.optimizer = copy.deepcopy(get_optimizer_state_dict(pl_module, trainer.optimizers[0]))  # by name


def test_a_checkpoint_of_two_fsdp2_processes_resumes_on_one(sharded, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = cli(
        [
            "fit",
            "--config",
            QUICKSTART,
            *QUICK,
            "--trainer.max_steps",
            "2",
            "--ckpt_path",
            str(sharded),
            "--trainer.callbacks+=tests.zoo.test_sharded_resume.Restored",
        ]
    )
    restored = next(c for c in run.trainer.callbacks if isinstance(c, Restored))
    saved = read_checkpoint(sharded)
    assert restored.step == 1 and run.trainer.global_step == 2
    assert set(restored.weights) == set(saved["state_dict"])
    for name, value in saved["state_dict"].items():
        assert torch.equal(restored.weights[name], value), name
    state = saved["optimizer_0"]["state"]
    # the step moved the weights away from the base model the resumed run was built from
    assert any(moments["exp_avg"].abs().sum() > 0 for moments in state.values())
    assert set(restored.optimizer["state"]) == set(state)
    for name, moments in state.items():
        for key, value in moments.items():  # exp_avg, exp_avg_sq, step
            assert torch.equal(restored.optimizer["state"][name][key], value), f"{name} {key}"
