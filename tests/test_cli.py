"""The ``zoo`` command end to end, in subprocesses: one device, 2-process DDP (gloo),
validate/test."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
SHORT = [
    "--trainer.max_steps",
    "4",
    "--trainer.val_check_interval",
    "4",
    "--trainer.log_every_n_steps",
    "1",
    "--data.init_args.val_size",
    "16",
    "--rollouts.every_n_steps",
    "2",
]


def zoo(*args: str, cwd: Path, timeout: int = 3 * 3600) -> subprocess.CompletedProcess:
    """``zoo <args>`` in a subprocess; its work is bounded by steps, ``timeout`` only catches a hang
    (a loaded machine runs many times slower)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "zoo", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def run_dir(cwd: Path) -> Path:
    (version,) = (cwd / "runs" / "lightning_logs").iterdir()
    return version


def metric_names(cwd: Path) -> set[str]:
    with open(run_dir(cwd) / "metrics.csv") as f:
        return set(csv.DictReader(f).fieldnames) - {"epoch", "step"}


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("single")
    return cwd, zoo("fit", "--config", QUICKSTART, *SHORT, cwd=cwd)


def test_fit_writes_metrics_rollouts_and_config(single):
    cwd, result = single
    names = metric_names(cwd)
    expected = {
        "train/reward",
        "train/reward/rotation/accuracy",
        "train/reward/rotation/format",
        "train/grpo/loss",
        "train/grpo/entropy",
        "train/grpo/clip_frac",
        "train/grpo/completion_len",
        "train/grpo/adv_std",
        "train/grpo/frac_zero_std",
        "perf/sample_s",
        "perf/train_s",
        "perf/tokens_per_s",
        "val/accuracy",
        "val/rotation/accuracy",
    }
    assert expected <= names, expected - names
    rows = [json.loads(line) for line in (run_dir(cwd) / "rollouts.jsonl").read_text().splitlines()]
    assert {"train", "val"} == {r["split"] for r in rows}
    assert {"prompt", "answer", "completion", "reward", "parts", "task", "step"} <= set(rows[0])
    assert (run_dir(cwd) / "config.yaml").exists()
    assert list((run_dir(cwd) / "checkpoints").glob("*.ckpt"))
    predictions = [json.loads(line) for line in (run_dir(cwd) / "predictions.jsonl").read_text().splitlines()]
    assert [r["at"] for r in predictions].count("start") == len(predictions) // 2  # before fit and at step 4
    assert json.loads((run_dir(cwd) / "metrics.json").read_text())["at"] == "step 4"  # the latest evaluation
    out = result.stdout + result.stderr
    assert "val accuracy at start" in out and "val accuracy at step 4" in out and "held-out accuracy" in out


def test_ddp_two_processes_log_the_same_metrics(single, tmp_path):
    cwd, _ = single
    # batch-std advantages, a global token mean and micro-batches exercise the cross-rank
    # collectives
    zoo(
        "fit",
        "--config",
        QUICKSTART,
        *SHORT,
        "--trainer.devices",
        "2",
        "--trainer.strategy",
        "zoo.grpo.GRPODDPStrategy",
        "--trainer.strategy.init_args.scale_rewards",
        "batch",
        "--trainer.strategy.init_args.loss_type",
        "dapo",
        "--trainer.strategy.init_args.micro_batch_size",
        "24",
        cwd=tmp_path,
    )
    assert metric_names(tmp_path) == metric_names(cwd)
    config = (run_dir(tmp_path) / "config.yaml").read_text()
    assert "GRPODDPStrategy" in config and "max_new_tokens: 1" in config


def test_fsdp_two_processes_then_resume_on_one(single, tmp_path):
    cwd, _ = single
    two, one = tmp_path / "two", tmp_path / "one"
    two.mkdir(), one.mkdir()
    # a KL term loads the reference model, sharded like the policy
    fsdp = [
        "--trainer.strategy",
        "zoo.grpo.GRPOFSDPStrategy",
        "--trainer.strategy.init_args.micro_batch_size",
        "24",
        "--trainer.strategy.init_args.beta",
        "0.04",
    ]
    zoo("fit", "--config", QUICKSTART, *SHORT, "--trainer.devices", "2", *fsdp, cwd=two)
    assert metric_names(two) == metric_names(cwd) | {"train/grpo/kl"}
    (ckpt,) = (run_dir(two) / "checkpoints").glob("*.ckpt")
    assert {"__0_0.distcp", "__1_0.distcp"} <= {p.name for p in ckpt.iterdir()}  # one shard per rank
    args = [a if a != "4" else "6" for a in SHORT]
    result = zoo("fit", "--config", QUICKSTART, *args, *fsdp, "--ckpt_path", str(ckpt), cwd=one)
    assert "`max_steps=6` reached" in result.stderr


def trained_weights(cwd: Path) -> dict:
    import torch

    (ckpt,) = (run_dir(cwd) / "checkpoints").glob("*.ckpt")
    return torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]


def test_one_process_and_two_processes_train_the_same_global_batch_alike(tmp_path):
    """4 prompts a step on 1 process, or 2 on each of 2: same rollouts, same rewards, same
    update."""
    import torch

    common = [
        "--trainer.max_steps",
        "3",
        "--trainer.log_every_n_steps",
        "1",
        "--validate_before_fit",
        "false",
        "--data.init_args.val_size",
        "0",
        "--rollouts.every_n_steps",
        "1",
        "--trainer.strategy.init_args.entropy_coef",
        "0.05",
    ]
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    zoo(
        "fit", "--config", QUICKSTART, *common, "--data.init_args.batch_size", "4", "--rollouts.max_rows", "32", cwd=one
    )
    zoo(
        "fit",
        "--config",
        QUICKSTART,
        *common,
        "--data.init_args.batch_size",
        "2",
        "--trainer.devices",
        "2",
        "--rollouts.max_rows",
        "16",
        "--trainer.strategy",
        "zoo.grpo.GRPODDPStrategy",
        cwd=two,
    )
    rows = [
        sorted(
            (r["step"], r["uid"], r["sample"], r["completion"], r["reward"])
            for line in (run_dir(d) / "rollouts.jsonl").read_text().splitlines()
            for r in [json.loads(line)]
        )
        for d in (one, two)
    ]
    # rank 0 of the 2-process run holds global prompts 0 and 1 (all 8 completions of each, 16 rows a
    # step)
    assert len(rows[1]) == 3 * 16 and len({uid for _, uid, *_ in rows[1]}) == 3 * 2
    assert [r for r in rows[0] if r[1] in {uid for _, uid, *_ in rows[1]}] == rows[1]
    with open(run_dir(one) / "metrics.csv") as f1, open(run_dir(two) / "metrics.csv") as f2:
        rewards = [[float(r["train/reward"]) for r in csv.DictReader(f) if r.get("train/reward")] for f in (f1, f2)]
    assert rewards[0] == pytest.approx(rewards[1], abs=1e-6)
    first, second = trained_weights(one), trained_weights(two)
    for name, value in first.items():
        torch.testing.assert_close(second[name], value, atol=1e-5, rtol=1e-4, msg=name)


def test_validate_and_test_from_a_checkpoint_write_metrics_and_every_prediction(single, tmp_path):
    cwd, _ = single
    (ckpt,) = (run_dir(cwd) / "checkpoints").glob("*.ckpt")
    for command, split in (("validate", "val"), ("test", "test")):
        out = tmp_path / command
        out.mkdir()
        result = zoo(
            command, "--config", QUICKSTART, f"--data.init_args.{split}_size", "16", "--ckpt_path", str(ckpt), cwd=out
        )
        assert f"{split} accuracy at checkpoint" in result.stderr
        rows = [json.loads(line) for line in (run_dir(out) / "predictions.jsonl").read_text().splitlines()]
        assert len(rows) == 16 and len({r["uid"] for r in rows}) == 16  # every held-out example, once
        assert {r["split"] for r in rows} == {split} and all(r["at"] == f"checkpoint {ckpt}" for r in rows)
        for row in rows:  # bare format: the parsed answer is the stripped completion; accuracy is exact match
            assert row["parsed"] in (None, row["completion"].strip())
            assert row["parts"]["accuracy"] == float(row["parsed"] == row["expected"])
        # the logged metrics are the means of these rows
        with open(run_dir(out) / "metrics.csv") as f:
            (logged,) = [r for r in csv.DictReader(f) if r.get(f"{split}/accuracy")]
        accuracy = sum(r["parts"]["accuracy"] for r in rows) / len(rows)
        assert float(logged[f"{split}/accuracy"]) == pytest.approx(accuracy)
        assert float(logged[f"{split}/reward"]) == pytest.approx(sum(r["reward"] for r in rows) / len(rows))
        assert {r["sample"] for r in rows} == {0}  # greedy by default: one completion per example
        results = json.loads((run_dir(out) / "metrics.json").read_text())
        assert results["at"] == f"checkpoint {ckpt}"
        assert results["metrics"][f"{split}/accuracy"] == pytest.approx(float(logged[f"{split}/accuracy"]))
    # `--ckpt_path last` finds the same checkpoint under runs/ and evaluates it alike
    shutil.copytree(cwd / "runs", tmp_path / "last" / "runs")
    zoo(
        "test", "--config", QUICKSTART, "--data.init_args.test_size", "16", "--ckpt_path", "last", cwd=tmp_path / "last"
    )
    latest = json.loads((tmp_path / "last" / "runs" / "lightning_logs" / "version_1" / "metrics.json").read_text())
    assert latest["at"].endswith(ckpt.name) and latest["metrics"] == pytest.approx(results["metrics"])


def test_test_samples_a_base_model_and_reports_the_means_of_its_predictions(tmp_path):
    """`zoo test` of the config's own weights (no checkpoint), 4 sampled completions per example:
    metrics.json and the logged metrics are the means of the rows of predictions.jsonl, pass@k
    included."""
    from math import comb

    grpo = "--trainer.strategy.init_args."
    sampled = [f"{grpo}eval_num_generations", "4", f"{grpo}eval_temperature", "1.0", f"{grpo}eval_pass_k", "[1, 2, 4]"]
    result = zoo("test", "--config", QUICKSTART, "--data.init_args.test_size", "8", *sampled, cwd=tmp_path)
    assert "test accuracy at start" in result.stderr and re.search(r"task +examples +accuracy +reward", result.stderr)
    rows = [json.loads(line) for line in (run_dir(tmp_path) / "predictions.jsonl").read_text().splitlines()]
    assert [(r["uid"], r["sample"]) for r in rows] == [(f"0:test:0:{i}", g) for i in range(8) for g in range(4)]
    results = json.loads((run_dir(tmp_path) / "metrics.json").read_text())
    assert results["split"] == "test" and results["at"] == "start" and results["settings"]["eval_seed"] == 0
    correct = [sum(r["parts"]["accuracy"] == 1 for r in rows[i : i + 4]) for i in range(0, 32, 4)]
    expected = {
        "accuracy": sum(r["parts"]["accuracy"] for r in rows) / 32,
        "examples": 8,
        "reward": sum(r["reward"] for r in rows) / 32,
        **{f"pass@{k}": sum(1 - comb(4 - c, k) / comb(4, k) for c in correct) / 8 for k in (1, 2, 4)},
    }
    expected |= {f"rotation/{k}": v for k, v in expected.items()}  # the quickstart's only task
    assert results["metrics"] == pytest.approx({f"test/{k}": v for k, v in expected.items()})
    with open(run_dir(tmp_path) / "metrics.csv") as f:
        (logged,) = list(csv.DictReader(f))
    assert {k: float(v) for k, v in logged.items() if v and k.startswith("test/")} == pytest.approx(
        {k: v for k, v in results["metrics"].items() if not k.endswith("examples")}
    )


def test_fit_resumes_from_the_last_checkpoint(single, tmp_path):
    cwd, _ = single
    shutil.copytree(cwd / "runs", tmp_path / "runs")
    args = [a if a != "4" else "6" for a in SHORT]  # two more steps than the checkpoint's 4
    result = zoo("fit", "--config", QUICKSTART, *args, "--ckpt_path", "last", cwd=tmp_path)
    # the validation before fit scores the restored weights: the same accuracy the first run ended
    # with
    final = re.search(r"val accuracy at step 4: (accuracy=[0-9.]+)", single[1].stderr)[1]
    assert re.search(rf"val accuracy at checkpoint \S+: {final}", result.stderr)
    assert "`max_steps=6` reached" in result.stderr
    with open(tmp_path / "runs" / "lightning_logs" / "version_1" / "metrics.csv") as f:
        steps = [int(row["step"]) for row in csv.DictReader(f) if row.get("train/reward")]
    # two more rollouts; Lightning's logging step restarts from the checkpoint's (saved during the
    # validation of batch 4, so it may read 3)
    assert len(steps) == 2 and steps[0] >= 3 and steps[1] == steps[0] + 1


def test_help_shows_docstrings(tmp_path):
    out = zoo("fit", "--help", cwd=tmp_path).stdout
    assert "--validate_before_fit" in out and "--rollouts.every_n_steps" in out
    strategy = zoo("fit", "--trainer.strategy.help", "zoo.grpo.GRPOStrategy", cwd=tmp_path).stdout
    assert "num_generations" in strategy and "completions sampled per prompt" in strategy


def test_bench_is_renamed_speed_with_a_one_line_pointer():
    from zoo.cli import main

    with pytest.raises(SystemExit, match="zoo bench is now zoo speed"):
        main(["bench", "--steps", "1"])
