"""Preemption is not success: SIGTERM, or Ctrl+C (SIGINT), during ``zoo fit`` saves the step in
progress and exits 143 / 130, ``--ckpt_path last`` resumes from that checkpoint, and ``zoo chain``
stops with the same status and resumes the stopped stage when run again."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback

from zoo.chain import run_chain

ROOT = Path(__file__).parents[2]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
QUICK = [
    "--data.init_args.val_size",
    "2",
    "--data.init_args.batch_size",
    "2",
    "--trainer.strategy.init_args.num_generations",
    "2",
    "--validate_before_fit",
    "false",
]
STEPS_FILE = "ZOO_TEST_STEPS"


class StepsDone(Callback):
    """Writes the number of optimizer steps done to ``$ZOO_TEST_STEPS`` after each step."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        Path(os.environ[STEPS_FILE]).write_text(str(trainer.global_step))


def fit(cwd: Path, *args: str, stop: signal.Signals | None = None) -> tuple[int, str, int]:
    """``zoo fit`` of the quickstart in ``cwd``, sent ``stop`` once its first step is done; returns
    its exit status, its stderr and the steps it had done when the signal was sent."""
    steps = cwd / "steps"
    log = cwd / "stderr.txt"
    steps.unlink(missing_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), **{STEPS_FILE: str(steps)})
    command = [sys.executable, "-m", "zoo", "fit", "--config", QUICKSTART, *QUICK, *args]
    command.append("--trainer.callbacks+=tests.zoo.test_preemption.StepsDone")
    with open(log, "w") as stderr:
        child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        done = 0
        deadline = time.monotonic() + 300
        while stop is not None and child.poll() is None and time.monotonic() < deadline:
            done = int(steps.read_text() or 0) if steps.is_file() else 0
            if done >= 1:
                child.send_signal(stop)
                break
            time.sleep(0.05)
        try:
            status = child.wait(timeout=300)
        finally:
            child.kill()
    return status, log.read_text(), done


def checkpoints(cwd: Path, version: int) -> list[Path]:
    return sorted((cwd / "runs" / "lightning_logs" / f"version_{version}" / "checkpoints").glob("*.ckpt"))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stopped_fit_saves_its_step_exits_nonzero_and_resumes(stop, tmp_path):
    status, stderr, done = fit(tmp_path, "--trainer.max_steps", "1000", stop=stop)
    expected = {signal.SIGTERM: 143, signal.SIGINT: 130}[stop]
    assert status == expected, stderr[-3000:]
    assert f"stopped by {stop.name} (exit status {expected}); --ckpt_path last resumes" in stderr.splitlines()[-1]
    (saved,) = checkpoints(tmp_path, 0)
    step = torch.load(saved, weights_only=True)["global_step"]
    assert step in (done, done + 1), (step, done)  # the step in progress when the signal came
    assert f"stopped by a signal: step {step} saved to {saved.relative_to(tmp_path)}" in stderr
    if stop is signal.SIGINT:
        return
    status, stderr, _ = fit(tmp_path, "--trainer.max_steps", str(step + 1), "--ckpt_path", "last")
    assert status == 0, stderr[-3000:]
    assert f"Restoring states from the checkpoint path at {saved.relative_to(tmp_path)}" in stderr
    (final,) = checkpoints(tmp_path, 1)
    assert torch.load(final, weights_only=True)["global_step"] == step + 1


class FakeFit:
    """Stands for a stage's ``zoo fit`` process (`subprocess.Popen`): records its command and ends
    with the next status of ``STATUSES``; a stopped one leaves the checkpoint of its last step."""

    commands: list[list[str]] = []
    statuses: list[int] = []

    def __init__(self, command, **kwargs):
        self.commands.append(command)
        self.returncode = self.statuses.pop(0)
        folder = Path(command[command.index("--trainer.callbacks.dirpath") + 1])
        folder.mkdir(parents=True, exist_ok=True)
        name = "last.ckpt" if self.returncode == 0 else "epoch=0-step=3.ckpt"
        torch.save({"global_step": 3, "state_dict": {}}, folder / name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def communicate(self, *args, **kwargs):
        return None, None

    def wait(self, timeout=None):
        return self.returncode

    poll = wait

    def kill(self):
        pass

    send_signal = kill


def test_chain_stops_with_a_stopped_stage_and_resumes_it_when_run_again(tmp_path, monkeypatch):
    (tmp_path / "fit.yaml").write_text("{}")
    (tmp_path / "chain.yaml").write_text("stages: [{name: grpo, config: fit.yaml}]")
    monkeypatch.setattr(subprocess, "Popen", FakeFit)
    monkeypatch.setattr("zoo.chain.export", lambda ckpt, out: Path(out).mkdir(parents=True))
    FakeFit.commands = []
    FakeFit.statuses = [143, 0]
    with pytest.raises(SystemExit) as exit_info:
        run_chain(str(tmp_path / "chain.yaml"), str(tmp_path / "out"))
    assert exit_info.value.code == 143  # a preempted stage is no finished stage
    stage = tmp_path / "out" / "grpo"
    assert not (stage / "model").exists() and "--ckpt_path" not in FakeFit.commands[0]
    run_chain(str(tmp_path / "chain.yaml"), str(tmp_path / "out"))
    resumed = FakeFit.commands[1]
    assert resumed[resumed.index("--ckpt_path") + 1] == str(stage / "checkpoints" / "epoch=0-step=3.ckpt")
    assert (stage / "model").is_dir()


class SignalDuringValidation(Callback):
    """Sends SIGTERM to its own process at the first held-out batch of fit's first validation."""

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        if trainer.state.fn == "fit" and not trainer.received_sigterm:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_signal_during_validation_saves_the_step_before_it(tmp_path):
    """Lightning stops a validation as soon as SIGTERM arrives: the step the validation followed,
    which no checkpoint holds yet, is saved then."""
    every_step = ["--trainer.val_check_interval", "1", "--data.init_args.val_size", "4"]
    signalled = "--trainer.callbacks+=tests.zoo.test_preemption.SignalDuringValidation"
    status, stderr, _ = fit(tmp_path, "--trainer.max_steps", "1000", *every_step, signalled)
    assert status == 143, stderr[-3000:]
    (saved,) = checkpoints(tmp_path, 0)
    assert torch.load(saved, weights_only=True)["global_step"] == 1
    assert f"stopped by a signal: step 1 saved to {saved.relative_to(tmp_path)}" in stderr
    status, stderr, _ = fit(tmp_path, "--trainer.max_steps", "2", *every_step, "--ckpt_path", "last")
    assert status == 0, stderr[-3000:]
    (final,) = checkpoints(tmp_path, 1)
    assert torch.load(final, weights_only=True)["global_step"] == 2


def test_sigterm_under_ddp_saves_the_step_of_every_rank_and_exits_143(tmp_path):
    # the scheduler's SIGTERM reaches rank 0, which passes it on; both ranks save the step together
    # (resuming a distributed checkpoint: tests/zoo/test_sharded_resume.py)
    ddp = ["--trainer.devices", "2", "--trainer.strategy", "zoo.grpo.GRPODDPStrategy"]
    status, stderr, done = fit(tmp_path, "--trainer.max_steps", "1000", *ddp, stop=signal.SIGTERM)
    assert status == 143, stderr[-3000:]
    assert "stopped by SIGTERM (exit status 143); --ckpt_path last resumes" in stderr.splitlines()[-1]
    (saved,) = checkpoints(tmp_path, 0)
    step = torch.load(saved, weights_only=True)["global_step"]
    assert step in (done, done + 1), (step, done)
    assert f"stopped by a signal: step {step} saved to" in stderr
