"""Rollout engines: a second engine (`canned_engine.CannedEngine`) plugged in by config alone trains
through the unchanged strategy, with dynamic sampling on; the policy enforces the engine contract;
`full_weights` is what an engine must load."""

import csv
import json
import random
from pathlib import Path

import pytest
import torch

from tasks import Example, Rotation
from tests.helpers import make_item
from tests.test_cli import QUICKSTART, run_dir, zoo
from tests.zoo.canned_engine import CannedEngine, constant_prompt
from zoo import QwenVLPolicy
from zoo.rollout.engine import full_weights
from zoo.rollout.hf import HFEngine

STEPS, BATCH, G = 3, 4, 8


@pytest.fixture(scope="module")
def canned_run(tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("canned")
    engine = {"class_path": "tests.zoo.canned_engine.CannedEngine", "init_args": {"log": str(cwd / "engine.jsonl")}}
    zoo(
        "fit",
        "--config",
        QUICKSTART,
        "--trainer.max_steps",
        str(STEPS),
        "--trainer.val_check_interval",
        str(STEPS),
        "--trainer.log_every_n_steps",
        "1",
        "--validate_before_fit",
        "false",
        "--data.init_args.val_size",
        "8",
        "--data.init_args.batch_size",
        str(BATCH),
        "--rollouts.every_n_steps",
        "1",
        "--rollouts.max_rows",
        "32",
        "--model.init_args.engine",
        json.dumps(engine),
        "--trainer.strategy.init_args.refill_rounds",
        "3",
        "--trainer.strategy.init_args.max_new_tokens",
        "2",
        cwd=cwd,
    )  # a letter and its EOS
    return cwd


def events(cwd: Path) -> list[dict]:
    return [json.loads(line) for line in (cwd / "engine.jsonl").read_text().splitlines()]


def test_an_engine_named_in_the_config_samples_every_rollout(canned_run):
    rows = [json.loads(line) for line in (run_dir(canned_run) / "rollouts.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    assert len(train) == STEPS * BATCH * G
    engine = CannedEngine()
    assert all(r["completion"] == engine.text(r["uid"], r["sample"]) for r in train)
    assert len({r["uid"] for r in train}) == STEPS * BATCH and len({r["reward"] for r in train}) > 1


def test_weights_are_pushed_once_per_step_before_sampling_and_memory_given_back(canned_run):
    log = events(canned_run)
    assert log[0]["event"] == "bind" and [e["event"] for e in log].count("bind") == 1
    syncs = [e for e in log if e["event"] == "sync"]
    assert [e["step"] for e in syncs] == [0, 1, 2, 3]  # 3 training steps, then the validation after the last
    assert len({e["checksum"] for e in syncs}) == 4  # each push carried the weights of that moment
    calls = [e["event"] for e in log if e["event"] != "bind"]
    assert calls[0] == "sync" and calls.count("generate") == calls.count("offload")
    assert all(calls[i + 1] == "offload" for i, call in enumerate(calls) if call == "generate")
    (ckpt,) = (run_dir(canned_run) / "checkpoints").glob("*.ckpt")
    final = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    assert syncs[-1]["checksum"] == pytest.approx(sum(float(t.double().sum()) for t in final.values()), rel=1e-9)


def test_dynamic_sampling_from_the_cli_refills_until_the_batch_is_full(canned_run):
    with open(run_dir(canned_run) / "metrics.csv") as f:
        steps = [r for r in csv.DictReader(f) if r.get("train/dynamic/rounds")]
    assert len(steps) == STEPS
    for r in steps:
        rounds, drawn, kept = (int(float(r[f"train/dynamic/{k}"])) for k in ("rounds", "groups_drawn", "groups_kept"))
        assert drawn == BATCH * (rounds + 1) and 0 <= rounds <= 3
        assert kept == BATCH or (float(r["train/dynamic/cap_hit"]) == 1 and rounds == 3)
    assert any(float(r["train/dynamic/rounds"]) > 0 for r in steps)  # half the canned groups have equal rewards
    training_generates = [e for e in events(canned_run) if e["event"] == "generate" and e["rows"] == BATCH * G]
    assert len(training_generates) == sum(1 + int(float(r["train/dynamic/rounds"])) for r in steps)


# ---- the contract, in process
# ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def policy():
    module = QwenVLPolicy("tiny:qwen2_5_vl")
    module.configure_model()
    return module


def examples() -> list[Example]:
    """An image prompt and a text prompt."""
    image = Rotation(answer_format="bare").make_example(make_item("image", 0), random.Random(0))
    text = Example([{"role": "user", "content": "Say hi."}], "hi", "text")
    image.uid, text.uid = "u0", "u1"
    return [image, text]


def test_hf_generate_is_the_default_engine(policy):
    assert isinstance(policy.engine, HFEngine) and policy.engine.policy is policy


@pytest.mark.parametrize(
    "engine, max_new_tokens, error",
    [
        (CannedEngine(["<|image_pad|>"]), 4, "banned token"),
        (CannedEngine(["A"], end_with_eos=False), 4, "without an EOS before max_new_tokens"),
        (CannedEngine(["A B C D E F G H"]), 3, "over max_new_tokens=3"),
    ],
)
def test_an_engine_that_breaks_the_contract_is_a_clear_error(policy, engine, max_new_tokens, error):
    engine.bind(policy)
    policy.engine = engine
    try:
        with pytest.raises(ValueError, match=f"rollout engine CannedEngine .*{error}"):
            policy.sample(examples(), 2, max_new_tokens=max_new_tokens, seed=0)
    finally:
        policy.engine = HFEngine()
        policy.engine.bind(policy)


def test_canned_ids_become_the_rollout_and_weights_are_synced_when_they_change(policy, tmp_path):
    engine = CannedEngine(["A", "Hello world"], log=str(tmp_path / "log.jsonl"))
    engine.bind(policy)
    policy.engine, policy._synced = engine, None
    try:
        first = policy.sample(examples(), 2, max_new_tokens=16, seed=0)
        policy.sample(examples(), 2, max_new_tokens=16, seed=1)  # same weights: no push
        policy.on_load_checkpoint({})  # new weights
        policy.sample(examples(), 2, max_new_tokens=16, seed=2)
    finally:
        policy.engine = HFEngine()
        policy.engine.bind(policy)
    assert first.completions == [engine.text(ex.uid, g) for ex in examples() for g in range(2)]
    assert not first.truncated.any() and first.completion_ids.shape[1] == max(
        len(policy.tokenizer(t, add_special_tokens=False)["input_ids"]) + 1 for t in first.completions
    )
    assert [e["event"] for e in events_of(tmp_path / "log.jsonl")].count("sync") == 2


def events_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_constant_prompts_are_about_half():
    assert 30 < sum(constant_prompt(f"0:train:0:{i}") for i in range(100)) < 70


@pytest.mark.parametrize("lora", [None, {"rank": 2}])
def test_full_weights_are_the_exported_weights(lora):
    module = QwenVLPolicy("tiny:qwen2_5_vl", lora=lora)
    module.configure_model()
    with torch.no_grad():
        for name, param in module.model.named_parameters():
            if "lora_B" in name:  # zero at initialisation: make the merge count
                param.normal_()
    weights = dict(full_weights(module))
    exported = module.merged_model().state_dict()
    assert weights.keys() == exported.keys()
    for name, value in exported.items():
        torch.testing.assert_close(weights[name], value, msg=name, rtol=1e-5, atol=1e-6)
    base = {
        n.replace(".base_layer", ""): v
        for n, v in module.model.state_dict().items()
        if n.endswith(".base_layer.weight")
    }
    assert bool(lora) == bool(base) and all(not torch.equal(weights[n], v) for n, v in base.items())  # merged
