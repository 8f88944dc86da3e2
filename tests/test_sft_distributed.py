"""SFT over DDP and FSDP2 (2 processes, gloo) makes the update of one process holding the same
global batch.

Demonstrations of different lengths ("0" to "270" degrees) and plain SGD (the update is the
gradient, so a wrong normaliser shows; Adam's first step would hide its scale) make a per-rank token
mean fail this test.
"""

import os
import subprocess
import sys
from pathlib import Path

import torch

from zoo.checkpoints import read_checkpoint

ROOT = Path(__file__).parents[1]
COMMON = [
    "--trainer.max_steps",
    "2",
    "--validate_before_fit",
    "false",
    "--data.init_args.val_size",
    "0",
    "--rollouts.every_n_steps",
    "0",
    "--trainer.strategy.init_args.max_grad_norm",
    "null",
    "--trainer.strategy.init_args.micro_batch_size",
    "1",
]


def run(config: Path, cwd: Path, *args: str) -> dict:
    cwd.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "zoo", "fit", "--config", str(config), *COMMON, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    (ckpt,) = cwd.glob("runs/lightning_logs/*/checkpoints/*.ckpt")
    return read_checkpoint(ckpt)["state_dict"]


def test_one_process_ddp_and_fsdp_train_the_same_global_batch_alike(tmp_path):
    text = (ROOT / "configs" / "sft" / "rotation.yaml").read_text()
    assert "labels: letters" in text and "class_path: torch.optim.AdamW" in text
    text = text.replace("labels: letters", "labels: degrees").replace("torch.optim.AdamW", "torch.optim.SGD")
    config = tmp_path / "sgd.yaml"
    config.write_text(text.replace("{lr: 3.0e-3, betas: [0.9, 0.99], weight_decay: 0.0}", "{lr: 1.0}"))
    one = run(config, tmp_path / "one", "--data.init_args.batch_size", "4")
    two = ["--data.init_args.batch_size", "2", "--trainer.devices", "2"]
    ddp = run(config, tmp_path / "ddp", *two, "--trainer.strategy", "zoo.sft.SFTDDPStrategy")
    fsdp = run(config, tmp_path / "fsdp", *two, "--trainer.strategy", "zoo.sft.SFTFSDPStrategy")
    for other in (ddp, fsdp):
        assert set(other) == set(one)
        for name, value in one.items():
            torch.testing.assert_close(other[name].float(), value.float(), atol=1e-5, rtol=1e-4, msg=name)
    # and training moved the weights at all (from the same random init in all three runs)
    from zoo import QwenVLPolicy

    torch.manual_seed(0)
    initial = QwenVLPolicy("tiny:qwen2_5_vl")
    initial.configure_model()
    moved = [not torch.equal(initial.state_dict()[name], value) for name, value in one.items()]
    assert sum(moved) > len(moved) // 2
