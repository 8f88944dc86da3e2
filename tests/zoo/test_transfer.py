"""The transfer claims at a reduced budget (a few steps, 8 held-out questions of each kind, a base
trained for a few steps): the rows, the curves, the seed statistics, the plot and the verdict
mechanics, not the results."""

import json

import pytest

pytest.importorskip("open3d")

from zoo.tools import perception_base  # noqa: E402
from zoo.tools.repro import base_grid, pretext_transfer, repro  # noqa: E402
from zoo.tools.repro.transfer import seed_stats  # noqa: E402

SMALL = {"steps": 2, "val_size": 8, "probe_every": 1}


@pytest.fixture(autouse=True)
def quick_base(monkeypatch):
    """A base of 3 SFT steps (its own cache key), so no test waits for the full build."""
    monkeypatch.setattr(perception_base, "STEPS", 3)


def test_pretext_transfer_rows_curves_plot_and_verdict(tmp_path, capsys):
    out = tmp_path / "out.json"
    result = repro(
        "pretext_transfer",
        **SMALL,
        seeds=[0, 1],
        arms=["base", "control (SFT)", "rotation"],
        json=str(out),
        plot=str(tmp_path / "curve.png"),
    )
    rows = {(r["arm"], r["seed"]): r for r in result["rows"]}
    assert set(rows) == {(a, s) for a in ("base", "control (SFT)", "rotation") for s in (0, 1)}
    # the control trains on as many sequences as the GRPO arm samples: 4 SFT steps of 16 per GRPO
    # step of 8 x 8
    assert rows["control (SFT)", 0]["steps"] == 8 and rows["rotation", 0]["steps"] == 2
    assert [s for s, _ in rows["rotation", 0]["curve"]] == [0, 1, 2]
    assert [s for s, _ in rows["control (SFT)", 0]["curve"]] == [0, 4, 8]
    for row in result["rows"]:
        assert set(row["after"]["downstream"]) == {"spatial", "counting", "depth", "temporal", "mean"}
        assert row["curve"][0][1] == row["before"]["downstream"] and row["cpu_s"] > 0
    # the base does not train: before = after, the same for every seed, so its spread is 0
    assert rows["base", 0]["after"] == rows["base", 0]["before"] == rows["base", 1]["after"]
    assert seed_stats(result["rows"], "base")[1] == 0.0
    assert "train" in rows["rotation", 0] and "rotation/accuracy" in rows["rotation", 0]["train"]
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "verdict:" in printed and "| rotation |" in printed and "± " in printed
    assert result["held"] is not None and "rotation:" in result["note"]
    merged = repro("pretext_transfer", merge=[str(out)])
    assert (merged["held"], merged["note"]) == (result["held"], result["note"])
    assert json.loads(out.read_text())["rows"] == json.loads(json.dumps(result["rows"]))


def test_verdict_needs_a_gain_over_both_and_the_spread():
    def row(arm, seed, mean):
        return {"arm": arm, "seed": seed, "after": {"downstream": {"mean": mean}}}

    rows = [row("base", s, 0.5) for s in range(3)] + [
        row("control (SFT)", s, m) for s, m in enumerate((0.5, 0.52, 0.54))
    ]
    gain = rows + [row("rotation", s, m) for s, m in enumerate((0.6, 0.61, 0.62))]
    assert pretext_transfer.verdict(gain)[0] is True
    within_spread = rows + [row("rotation", s, m) for s, m in enumerate((0.45, 0.6, 0.75))]
    assert pretext_transfer.verdict(within_spread)[0] is False
    below_control = rows + [row("rotation", s, m) for s, m in enumerate((0.53, 0.53, 0.53))]
    held, note = pretext_transfer.verdict(below_control)
    assert held is False and "no gain" in note
    assert pretext_transfer.verdict(rows)[0] is None


def test_cold_start_runs_sft_then_grpo(capsys):
    result = repro("cold_start", **{**SMALL, "steps": 4, "probe_every": 2})
    rows = {r["arm"]: r for r in result["rows"]}
    assert rows["GRPO only"]["stages"] == [("grpo", 1.0)]
    assert rows["SFT cold start + GRPO"]["stages"] == [("sft", 0.5), ("grpo", 1.0)]
    # the curve runs on across both stages: 2 SFT steps, then 4 GRPO steps
    assert [s for s, _ in rows["SFT cold start + GRPO"]["curve"]] == [0, 1, 2, 4, 6]
    for row in rows.values():
        assert set(row["after"]["depth order"]) >= {"accuracy", "format"}
    assert "held-out depth order" in capsys.readouterr().out and result["held"] is not None


def test_base_graded_binary_groups_are_all_zero_at_least_as_often():
    result = repro("base_graded", **{**SMALL, "probe_every": 0})
    rows = {r["arm"]: r for r in result["rows"]}
    # the exact order pays 1 or 0 where the footrule pays 1, 0.5 or 0 for the same samples
    assert rows["binary"]["train"]["frac_zero_std"][0] >= rows["graded"]["train"]["frac_zero_std"][0]
    assert set(rows["graded"]["after"]["order"]) >= {"footrule", "exact"} and "footrule" in result["note"]


def test_base_grid_scores_both_grids():
    result = repro("base_grid", **{**SMALL, "probe_every": 0})
    rows = {r["arm"]: r for r in result["rows"]}
    assert set(rows) == {"base", "train 2x1"}
    assert set(rows["train 2x1"]["after"]) == {"downstream", "2x1", "3x1"} and "held-out 3x1" in result["note"]
    assert 1 / 8 <= rows["train 2x1"]["after"]["3x1"]["majority"] <= 1


def test_base_grid_verdict_rejects_a_one_letter_collapse_and_an_unlearned_2x1():
    def row(arm, seed, three, two=0.7, majority=0.6):
        return {
            "arm": arm,
            "seed": seed,
            "after": {"3x1": {"accuracy": three, "majority": majority}, "2x1": {"accuracy": two, "majority": majority}},
        }

    base = [row("base", s, 0.45) for s in range(3)]
    assert base_grid.verdict(base + [row("train 2x1", s, 0.6) for s in range(3)])[0] is True
    collapsed = base + [row("train 2x1", s, 0.6, majority=m) for s, m in enumerate((0.6, 0.9, 0.6))]
    assert base_grid.verdict(collapsed)[0] is False
    unlearned = base + [row("train 2x1", s, 0.6, two=0.5) for s in range(3)]
    held, note = base_grid.verdict(unlearned)
    assert held is False and "2x1 accuracy 0.500" in note
    assert base_grid.verdict(base + [row("train 2x1", s, 0.49) for s in range(3)])[0] is False


def test_zoo_test_scores_the_synthetic_questions(tmp_path, monkeypatch):
    """configs/eval/synthetic_questions.yaml through `zoo test`: every held-out question once,
    strict letters."""
    import csv

    from tests.test_cli import ROOT, run_dir
    from zoo.cli import cli

    monkeypatch.chdir(tmp_path)
    cli(
        [
            "test",
            "--config",
            str(ROOT / "configs/eval/synthetic_questions.yaml"),
            "--model.init_args.pretrained",
            "tiny:qwen2_5_vl",
            "--data.init_args.source.init_args.size",
            "8",
            "--trainer.accelerator",
            "cpu",
            "--trainer.enable_progress_bar",
            "false",
        ]
    )
    rows = [json.loads(line) for line in (run_dir(tmp_path) / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and [r["expected"] for r in rows[:2]] != [None, None]
    with open(run_dir(tmp_path) / "metrics.csv") as f:
        (logged,) = [{k: float(v) for k, v in r.items() if v} for r in csv.DictReader(f)]
    right = sum(r["parts"]["accuracy"] for r in rows) / 8
    assert logged["test/accuracy"] == pytest.approx(right)


def test_base_cache_key_follows_the_recipe(monkeypatch):
    """A change to the base's steps, learning rate or batch builds a new base, not the cached
    one."""
    keys = {perception_base.key()}
    for name, value in (("STEPS", 4), ("LR", 5e-4), ("BATCH", 8)):
        monkeypatch.setattr(perception_base, name, value)
        keys.add(perception_base.key())
    assert len(keys) == 4
    assert perception_base.resolve().endswith(f"qwen2_5_vl_perception-{perception_base.key()}")
