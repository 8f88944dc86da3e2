"""Multi-turn rollouts on 2 processes: rank 0's rows call the toy tool (`tool_script`), rank 1's
answer at once, so the ranks hold different numbers of turns; DDP and FSDP2 (whose scoring passes
must stay in step across ranks) make the same updates, and both train."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from zoo.checkpoints import read_checkpoint

ROOT = Path(__file__).parents[2]
ENGINE = {"class_path": "tests.zoo.tool_script.Scripted", "init_args": {"by_rank": True}}
TASK = "[{class_path: tests.zoo.tool_script.LookRotation, init_args: {labels: letters, answer_format: bare}}]"
ARGS = [
    *("--trainer.max_steps", "2"),
    *("--trainer.devices", "2"),
    *("--data.init_args.batch_size", "2"),
    *("--data.init_args.val_size", "0"),
    *("--data.init_args.tasks", TASK),
    *("--model.init_args.engine", json.dumps(ENGINE)),
    *("--validate_before_fit", "false"),
    *("--rollouts.every_n_steps", "0"),
    *("--trainer.strategy.init_args.max_new_tokens", "32"),
    *("--trainer.strategy.init_args.micro_batch_size", "4"),
    *("--trainer.strategy.init_args.entropy_coef", "0.1"),  # a gradient even when every reward is equal
    *("--trainer.strategy.init_args.max_grad_norm", "null"),
]


def run(config: Path, cwd: Path, strategy: str) -> dict:
    cwd.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "zoo", "fit", "--config", str(config), *ARGS, "--trainer.strategy", strategy]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    (ckpt,) = cwd.glob("runs/lightning_logs/*/checkpoints/*.ckpt")
    return read_checkpoint(ckpt)["state_dict"]


def test_ddp_and_fsdp2_train_a_tool_task_alike(tmp_path):
    text = (ROOT / "configs" / "quickstart.yaml").read_text()
    old = "class_path: torch.optim.AdamW\n      init_args: {lr: 3.0e-4, betas: [0.9, 0.99], weight_decay: 0.0}"
    assert old in text
    config = tmp_path / "sgd.yaml"
    config.write_text(text.replace(old, "class_path: torch.optim.SGD\n      init_args: {lr: 1.0}"))
    ddp = run(config, tmp_path / "ddp", "zoo.grpo.GRPODDPStrategy")
    fsdp = run(config, tmp_path / "fsdp", "zoo.grpo.GRPOFSDPStrategy")
    assert set(fsdp) == set(ddp)
    for name, value in ddp.items():
        torch.testing.assert_close(fsdp[name].float(), value.float(), atol=1e-5, rtol=1e-4, msg=name)
    from zoo import QwenVLPolicy

    torch.manual_seed(0)
    initial = QwenVLPolicy("tiny:qwen2_5_vl")
    initial.configure_model()
    moved = [not torch.equal(initial.state_dict()[name], value) for name, value in ddp.items()]
    assert sum(moved) > len(moved) // 2
