"""A run killed with SIGKILL mid-training resumes from its last checkpoint and ends where an
uninterrupted run ends; a checkpoint write that dies half-way leaves the previous checkpoint
intact."""

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import fsspec.implementations.local
import pytest
import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch import Callback, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from datamodules import PretextDataModule, SyntheticScenes
from tasks import Rotation
from tests.zoo.tool_script import CallsFirst, LookRotation
from zoo import GRPOStrategy, QwenVLPolicy

ROOT = Path(__file__).parents[2]
STEPS = 5


class KillAt(Callback):
    """SIGKILL this process once ``step`` optimizer steps are done: no cleanup, no final
    checkpoint."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def train(save_dir: str, kill_at: int | None = None, resume: bool = False, tools: bool = False) -> dict:
    """The run under test: checkpoints to ``save_dir`` every step (keeping ``last.ckpt``); with
    ``tools`` a two-turn tool task whose even samples call the tool first (`tool_script`)."""
    torch.manual_seed(0)
    engine = {"engine": CallsFirst()} if tools else {}
    policy = QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3), **engine)
    data = PretextDataModule(
        SyntheticScenes(size=100),
        (LookRotation if tools else Rotation)(labels="letters", answer_format="bare"),
        batch_size=4,
        val_size=0,
        epoch_size=12,
    )  # 3 batches an epoch: crosses one
    callbacks = [ModelCheckpoint(save_dir, every_n_train_steps=1, save_last=True)]
    callbacks += [KillAt(kill_at)] if kill_at else []
    trainer = Trainer(
        max_steps=STEPS,
        strategy=GRPOStrategy(num_generations=4, max_new_tokens=24 if tools else 3, entropy_coef=0.05),
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        limit_val_batches=0,
    )
    trainer.fit(policy, data, ckpt_path=str(Path(save_dir) / "last.ckpt") if resume else None)
    return {n: p.detach().clone() for n, p in policy.named_parameters()}


def in_subprocess(call: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    code = f"from tests.zoo.test_kill_resume import train; {call}"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("tools", [False, True], ids=["one turn", "tool turns"])
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, tools):
    killed = in_subprocess(f"train({str(tmp_path)!r}, kill_at=3, tools={tools})")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["global_step"] == 2  # step 3's save never ran
    out = tmp_path / "resumed.pt"
    resumed = in_subprocess(
        f"import torch; torch.save(train({str(tmp_path)!r}, resume=True, tools={tools}), {str(out)!r})"
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    straight = train(str(tmp_path / "straight"), tools=tools)
    after = torch.load(out, weights_only=True)
    for name, value in straight.items():
        torch.testing.assert_close(after[name], value, rtol=0, atol=1e-6, msg=name)


def test_a_write_that_dies_half_way_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    train(str(tmp_path))
    last = tmp_path / "last.ckpt"
    before = last.read_bytes()

    def dies_half_way(self, data):
        self.f.write(data[: len(data) // 2])
        raise OSError("disk gone")

    monkeypatch.setattr(fsspec.implementations.local.LocalFileOpener, "write", dies_half_way, raising=False)
    with pytest.raises(OSError, match="disk gone"):  # the writer every checkpoint goes through
        TorchCheckpointIO().save_checkpoint({"state": torch.zeros(1000)}, last)
    assert last.read_bytes() == before
    torch.load(last, weights_only=True)


class Payload:
    """What a hostile checkpoint could carry: unpickling it would create ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_a_checkpoint_cannot_run_code_when_resumed(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"state_dict": {}, "payload": Payload(marker)}, tmp_path / "last.ckpt")
    with pytest.raises(Exception, match="[Ww]eights only load failed"):
        train(str(tmp_path), resume=True)
    assert not marker.exists()
