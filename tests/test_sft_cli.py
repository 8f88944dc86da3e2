"""SFT through the CLI learns, and `zoo chain` runs SFT then GRPO on a second task from the SFT
weights.

One chain run (about a minute on 2 cores) backs every test here: its SFT stage is `zoo fit --config
configs/sft/rotation.yaml` unchanged (a tiny random-init model from chance to >= 0.9 held-out
accuracy), its GRPO stage two steps of configs/sft/jigsaw_pair_grpo.yaml.
"""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.test_configs import parse_args
from zoo.chain import load_chain

ROOT = Path(__file__).parents[1]
SHORT_GRPO = [
    "--trainer.max_steps",
    "2",
    "--trainer.val_check_interval",
    "2",
    "--data.init_args.val_size",
    "16",
    "--rollouts.every_n_steps",
    "0",
]


def zoo(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "zoo", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def validations(folder: Path) -> list[dict]:
    (metrics,) = folder.glob("lightning_logs/*/metrics.csv")
    with open(metrics) as f:
        return [row for row in csv.DictReader(f) if row.get("val/accuracy")]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("chain")
    stages = [
        {"name": "sft", "config": str(ROOT / "configs/sft/rotation.yaml")},
        {"name": "grpo", "config": str(ROOT / "configs/sft/jigsaw_pair_grpo.yaml"), "args": SHORT_GRPO},
    ]
    (cwd / "chain.yaml").write_text(yaml.safe_dump({"out": "out", "stages": stages}))
    return cwd, zoo("chain", "--config", "chain.yaml", cwd=cwd)


def test_sft_takes_a_random_init_model_from_chance_to_high_held_out_accuracy(chain):
    cwd, _ = chain
    accuracy = [float(row["val/accuracy"]) for row in validations(cwd / "out" / "sft")]
    assert len(accuracy) >= 2 and accuracy[0] <= 0.34 and accuracy[-1] >= 0.9, accuracy
    with open(next((cwd / "out" / "sft").glob("lightning_logs/*/metrics.csv"))) as f:
        rows = [row for row in csv.DictReader(f) if row.get("train/sft/loss")]
    assert float(rows[-1]["train/sft/loss"]) < float(rows[0]["train/sft/loss"]) / 4
    assert float(rows[-1]["train/sft/token_accuracy"]) >= 0.9


def test_grpo_stage_starts_from_the_sft_weights_and_every_stage_keeps_its_outputs(chain):
    cwd, _ = chain
    out = (cwd / "out").resolve()
    config = yaml.safe_load(next((out / "grpo").glob("lightning_logs/*/config.yaml")).read_text())
    assert config["model"]["init_args"]["pretrained"] == str(out / "sft" / "model")
    # the cold start taught the answer format (a letter, then the end of the turn): the GRPO stage's
    # first validation, before any GRPO step, earns the format reward (0.5) that a random-init model
    # does not
    start = validations(out / "grpo")[0]
    assert start["step"] == "0" and float(start["val/jigsaw_pair/reward"]) >= 0.4
    summary = json.loads((out / "chain.json").read_text())
    assert [s["name"] for s in summary] == ["sft", "grpo"] and summary[1]["started_from"] == str(out / "sft" / "model")
    for stage in summary:
        assert Path(stage["checkpoint"]).is_file() and (Path(stage["model"]) / "config.json").is_file()
        assert set(stage["metrics"]) >= {"val/accuracy", "val/pass@1"}
    assert summary[0]["metrics"]["val/accuracy"] >= 0.9
    # finished stages are not run again
    again = zoo("chain", "--config", "chain.yaml", cwd=cwd)
    assert again.stdout.count("not run again") == 2


def test_a_checkpoint_as_pretrained_starts_from_its_weights(chain, tmp_path):
    from zoo.cli import cli

    cwd, _ = chain
    ckpt = cwd / "out" / "sft" / "checkpoints" / "last.ckpt"
    # the one line a GRPO config needs: where the run is composed, the checkpoint is exported once
    # and loaded
    composed = cli(
        [
            "--config",
            str(ROOT / "configs/sft/jigsaw_pair_grpo.yaml"),
            "--model.init_args.pretrained",
            str(ckpt),
            "--trainer.default_root_dir",
            str(tmp_path),
        ],
        run=False,
    )
    policy = composed.model
    policy.configure_model()
    trained = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    state = policy.state_dict()
    assert set(trained) == set(state)
    for name, value in trained.items():
        assert torch.equal(state[name], value), name


def test_a_checkpoint_given_to_a_policy_in_python_names_the_export(chain):
    from zoo import QwenVLPolicy

    cwd, _ = chain
    ckpt = cwd / "out" / "sft" / "checkpoints" / "last.ckpt"
    with pytest.raises(ValueError, match=r"is a zoo training checkpoint: .*zoo.export.as_pretrained"):
        QwenVLPolicy(pretrained=str(ckpt)).configure_model()


CHAINS = sorted(str(p) for p in (ROOT / "configs" / "chains").glob("*.yaml"))


@pytest.mark.parametrize("path", CHAINS, ids=lambda p: Path(p).name)
def test_every_chain_file_names_stage_configs_that_parse(path):
    _, stages = load_chain(path)
    assert stages
    for stage in stages:
        parse_args(["--config", stage["config"], *stage["args"]])


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"stages": []}, "non-empty 'stages'"),
        ({"stages": [{"name": "a b", "config": "x.yaml"}]}, "unique name"),
        ({"stages": [{"name": "a", "config": "missing.yaml"}]}, "no existing config"),
        ({"stages": [{"name": "a", "config": "ok.yaml", "args": "--x"}]}, "list of strings"),
    ],
)
def test_a_bad_chain_file_is_a_clear_error(tmp_path, spec, message):
    (tmp_path / "ok.yaml").write_text("{}")
    (tmp_path / "chain.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match=message):
        load_chain(str(tmp_path / "chain.yaml"))
