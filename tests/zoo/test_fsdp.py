"""FSDP2: which blocks become units, and one GRPO step of every family x tiny checkpoint on 2
processes."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch import nn

from tests.zoo.fsdp_families import CASES, case_id
from zoo import tiny
from zoo.sharding import shard_blocks

ROOT = Path(__file__).parents[2]


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn, self.mlp = nn.Linear(2, 2), nn.Linear(2, 2)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.layers = nn.Conv1d(2, 2, 1), nn.ModuleList([Layer(), Layer()])


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder, self.head = Encoder(), nn.ModuleList([Layer()]), nn.Linear(2, 2)


def test_nested_no_split_modules_give_the_outermost_block_once():
    model = Model()
    # Omni-like: an encoder listed with its layers; Qwen2-Audio-like: a layer listed with its
    # attention
    assert list(shard_blocks(model, {"Encoder", "Layer"})) == [model.encoder, model.decoder[0]]
    assert list(shard_blocks(model, {"Layer", "Linear"})) == [*model.encoder.layers, model.decoder[0], model.head]
    assert list(shard_blocks(model, set())) == []


def test_every_tiny_family_is_a_case():
    """The 3B-shape family is left out: it has the real model's parameter count (GPU speed
    measurements only)."""
    assert {ckpt.removeprefix("tiny:") for _, ckpt in CASES} == set(tiny.families()) - {"qwen2_5_vl_3b"}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    """Both ranks' reports of `tests.zoo.fsdp_families`, run by torchrun in fresh interpreters (a
    forked child of this one could deadlock in torch's thread pool)."""
    out = tmp_path_factory.mktemp("fsdp")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "tests.zoo.fsdp_families",
            str(out),
        ],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def _assert_sharded(params: list[dict], name: str) -> None:
    """Rank 0 holds the first ceil(rows / 2) rows of a parameter, rank 1 the rest, both on a 2-rank
    mesh."""
    first, second = params
    assert first["dtensor"] and second["dtensor"], f"{name} is not sharded"
    assert first["placements"] == second["placements"] == ["S(0)"] and first["mesh_size"] == 2, name
    rows, rest = first["shape"][0], first["shape"][1:]
    assert first["local_shape"] == [math.ceil(rows / 2), *rest], name
    assert second["local_shape"] == [rows - math.ceil(rows / 2), *rest], name


@pytest.mark.parametrize("case", [case_id(*c) for c in CASES])
def test_a_grpo_step_on_two_processes_shards_every_parameter_and_updates_them(ranks, case):
    reports = [r[case] for r in ranks]
    assert [r["steps"] for r in reports] == [1, 1]
    assert all(math.isfinite(r["loss"]) for r in reports)
    for kind in ("params", "reference"):  # the frozen reference (beta > 0) is sharded like the policy
        for name in reports[0][kind]:
            _assert_sharded([r[kind][name] for r in reports], f"{kind} {name}")
    params = [r["params"] for r in reports]
    for name, p in params[0].items():
        if p["group"] == "llm":  # each rank's optimizer updated its own shard
            assert p["changed"] and params[1][name]["changed"], f"{name} did not change on both ranks"
    changed = {p["group"] for rank in params for p in rank.values() if p["changed"]}
    assert changed == {p["group"] for p in params[0].values()}, "a module group received no update"


@pytest.mark.parametrize("case", [case_id(*c) for c in CASES])
def test_full_weights_for_a_rollout_engine_are_the_gathered_shards(ranks, case):
    """What a rollout engine is given under FSDP2: every rank the same full tensors, each the
    concatenation of the ranks' shards (its sum is theirs), under the parameter's own name and
    shape."""
    reports = [r[case] for r in ranks]
    full = reports[0]["full_weights"]
    assert reports[1]["full_weights"] == full
    for name, p in reports[0]["params"].items():
        assert full[name]["shape"] == p["shape"], name
        shards = p["local_sum"] + reports[1]["params"][name]["local_sum"]
        assert full[name]["sum"] == pytest.approx(shards, rel=1e-9, abs=1e-9), name
