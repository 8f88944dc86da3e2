"""The self-reward and difficulty configs run GRPO steps on their tiny models from the command line,
logging the self-reward beside the true accuracy (and, for the difficulty sampler, weighting the
next epoch)."""

from pathlib import Path

import pytest
import torch

from zoo.cli import cli

CONFIGS = Path(__file__).parents[1] / "configs"
TINY = [
    "--trainer.max_steps",
    "2",
    "--trainer.val_check_interval",
    "2",
    "--trainer.logger",
    "false",
    "--trainer.enable_checkpointing",
    "false",
    "--validate_before_fit",
    "false",
    "--trainer.strategy.init_args.num_generations",
    "2",
    "--data.init_args.batch_size",
    "2",
    "--data.init_args.val_size",
    "2",
    "--rollouts.every_n_steps",
    "0",
]
CASES = [
    ("self_reward_majority.yaml", "rotation", "label_accuracy"),
    ("self_reward_coreward.yaml", "rotation", "label_accuracy"),
    ("self_reward_gui.yaml", "gui_grounding", "consensus"),
]


def fit(config: str, *extra: str):
    torch.manual_seed(0)
    return cli(["fit", "--config", str(CONFIGS / config), *TINY, *extra]).trainer


@pytest.mark.parametrize("config, task, logged", CASES, ids=[c[0] for c in CASES])
def test_a_self_reward_config_trains_and_logs_the_truth_beside_it(config, task, logged, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = fit(config)
    metrics = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(metrics["train/grpo/loss"])
    for part in ("agreement", "accuracy", "abstained"):
        assert f"train/reward/{task}/{part}" in metrics, sorted(metrics)
    assert f"val/{task}/accuracy" in metrics and "val/reward/agreement" not in str(sorted(metrics))


def test_the_acre_config_pays_consistency_and_reports_maj_at_k(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = fit(
        "consistency_acre.yaml",
        "--trainer.strategy.init_args.eval_maj_k",
        "[2]",
        "--trainer.strategy.init_args.eval_num_generations",
        "2",
    )
    metrics = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(metrics["train/grpo/loss"])
    for part in ("agreement", "accuracy", "consistent", "abstained"):
        assert f"train/reward/mcq/{part}" in metrics, sorted(metrics)
    assert "val/maj@2" in metrics and "val/mcq/maj@2" in metrics and "val/pass@2" in metrics
    assert trainer.strategy.scale_rewards == "gpg"


def test_the_difficulty_config_weights_the_second_epoch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = fit(
        "difficulty_demo.yaml",
        "--data.init_args.epoch_size",
        "2",
        "--trainer.max_steps",
        "3",
        "--data.init_args.source.init_args.size",
        "16",
    )
    [sampler] = [c for c in trainer.callbacks if type(c).__name__ == "DifficultySampler"]
    epoch, weights = sampler.current
    assert trainer.global_step == 3 and epoch == 3 and len(weights["image"]) == 14
    assert len(sampler.rates.rates["image"]) >= 1 and max(weights["image"]) <= 1.0
