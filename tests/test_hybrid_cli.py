"""Each hybrid of docs/sft.md#hybrids through ``zoo fit`` with its config under configs/hybrid/, a
few steps on the tiny random-init Qwen2.5-VL (in this process: the imports dominate a subprocess's
time)."""

import csv
from pathlib import Path

import pytest

from zoo.cli import main

ROOT = Path(__file__).parents[1]
SHORT = [
    "--trainer.limit_val_batches",
    "0",
    "--data.init_args.val_size",
    "0",
    "--rollouts.every_n_steps",
    "0",
    "--trainer.log_every_n_steps",
    "1",
    "--trainer.enable_progress_bar",
    "false",
]


def fit(config: str, tmp_path: Path, monkeypatch, *args: str) -> list[dict]:
    """Train ``configs/hybrid/<config>.yaml`` in ``tmp_path``; the logged training rows, by step."""
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", str(ROOT / "configs/hybrid" / f"{config}.yaml"), *SHORT, *args])
    (path,) = tmp_path.glob("runs/lightning_logs/*/metrics.csv")
    with open(path) as f:
        rows = [{k: float(v) for k, v in row.items() if v} for row in csv.DictReader(f)]
    return [row for row in rows if "train/reward" in row or "train/entropulse/sft" in row]


@pytest.mark.parametrize("config", ["srft", "luffy"])
def test_the_demonstration_joins_every_group(config, tmp_path, monkeypatch):
    rows = fit(config, tmp_path, monkeypatch, "--trainer.max_steps", "2")
    assert len(rows) == 2
    for row in rows:
        assert row["train/hybrid/expert_reward"] == 1.0  # the task's perfect answer, verified like a sample
        assert row["train/hybrid/expert_dropped"] == 0.0 and 0.0 < row["train/hybrid/expert_prob"] < 1.0
        assert row["train/reward"] < 0.5  # the random policy's own samples: the demonstrations are not counted
        if config == "srft":  # a random-init policy is unsure (entropy ~ log V): w_SFT = 0.5 exp(-H) is tiny
            assert 0.0 < row["train/hybrid/sft_weight"] < 0.01 and row["train/hybrid/sft_loss"] > 1.0
        else:
            assert "train/hybrid/sft_loss" not in row


def test_entropulse_switches_to_sft_and_back(tmp_path, monkeypatch):
    guidance = "--trainer.strategy.init_args.guidance.init_args."
    rows = fit(
        "entropulse",
        tmp_path,
        monkeypatch,
        "--trainer.max_steps",
        "3",
        f"{guidance}threshold",
        "100",
        f"{guidance}window",
        "1",
        f"{guidance}sft_steps",
        "1",
        f"{guidance}success",
        "0",
    )
    assert [row["train/entropulse/sft"] for row in rows] == [0.0, 1.0, 0.0]
    rl, sft, again = rows
    assert rl["train/entropulse/buffer"] == 8  # every example's completions count as successes at success 0
    assert sft["train/entropulse/phases"] == 1 and sft["train/entropulse/sft_loss"] > 0
    # the SFT step samples nothing (the buffer waits for the next RL step's 8 examples), so its row
    # holds no reward, and it has a gradient (a GRPO step has none when all its rewards are 0)
    assert "train/reward" not in sft and "train/reward" in again
    assert sft["train/entropulse/buffer"] == 8 and again["train/entropulse/buffer"] == 16
    assert sft["train/grpo/grad_norm"] > 0.0
    assert rl["train/grpo/grad_norm"] == 0.0 or rl["train/reward"] > 0.0


def test_srl_rewards_the_asked_step(tmp_path, monkeypatch):
    rows = fit("srl_jigsaw", tmp_path, monkeypatch, "--trainer.max_steps", "2")
    for row in rows:
        # a random policy rarely writes a valid number: -1 (format_penalty) unless it does
        assert -1.0 <= row["train/reward"] <= 1.0 and "train/reward/jigsaw_steps/exact" in row
