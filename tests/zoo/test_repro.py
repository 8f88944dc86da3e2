"""`zoo repro`: each claim's script at a reduced budget (a few steps, 8 held-out items). The
headline results need the full budget (docs/reproductions.md); here the tables, the JSON, the
held-out sets and what is robust after a few steps (the zero-variance mechanism, the KL term) are
checked."""

import json

import pytest

from zoo.cli import main as zoo_main
from zoo.tools.repro import dynamic_sampling, grid_transfer, repro, tool_use

SMALL = {"steps": 2, "val_size": 8}


def test_graded_reward_binary_groups_are_all_zero_more_often(tmp_path, capsys):
    result = repro("graded_reward", **SMALL, json=str(tmp_path / "out.json"))
    rows = {r["arm"]: r for r in result["rows"]}
    assert set(rows) == {"graded", "binary"} and all(r["steps"] == 2 and r["B"] == 4 for r in rows.values())
    # a random policy rarely picks the exact order among 24: binary groups are nearly all zero,
    # graded vary
    assert rows["binary"]["train"]["frac_zero_std"][0] > rows["graded"]["train"]["frac_zero_std"][0] + 0.3
    for row in rows.values():
        assert set(row["after"]["jigsaw"]) >= {"accuracy", "exact", "footrule", "format"}
        assert row["train"]["temporal_jigsaw/footrule"][0] >= row["train"]["temporal_jigsaw/exact"][0]
    assert json.loads((tmp_path / "out.json").read_text())["rows"] == json.loads(json.dumps(result["rows"]))
    out = capsys.readouterr().out
    assert "| graded | 0 | 2 |" in out and "| binary | 0 | 2 |" in out
    assert "verdict: inconclusive (ran 2 of the 150 steps the claim declares)" in out
    # arms run apart are merged from their JSON files without training
    merged = repro("graded_reward", merge=[str(tmp_path / "out.json")])
    assert (merged["held"], merged["note"]) == (result["held"], result["note"]) and result["held"] is not None


def test_grid_transfer_evaluates_both_grid_sizes(capsys):
    zoo_main(["repro", "grid_transfer", "--steps", "2", "--val_size", "8", "--arms", "[train 2x1]"])
    result = repro("grid_transfer", **SMALL, arms=["train 2x1"])
    (row,) = result["rows"]
    assert row["arm"] == "train 2x1" and set(row["before"]) == set(row["after"]) == {"2x1", "3x1"}
    assert row["cpu_s"] > 0 and row["wall_s"] > 0
    # the untrained tiny policy answers no valid letter greedily: the baseline is 0, below chance
    assert row["before"]["2x1"]["accuracy"] == row["before"]["3x1"]["accuracy"] == 0.0
    assert "3x1 0.00 ->" in result["note"]
    assert "held-out 3x1 accuracy" in capsys.readouterr().out


@pytest.mark.parametrize(("claim", "arm"), [("grid_transfer", "train 2x1"), ("pretext_transfer", "clip order")])
def test_an_unknown_arm_is_an_error_not_an_empty_run(claim, arm):
    with pytest.raises(ValueError, match=r"no arm named \['KL 0.04'\] in this claim; its arms: \["):
        repro(claim, **SMALL, arms=[arm, "KL 0.04"])


def test_grid_transfer_eval_sets_differ_only_in_grid():
    evals = grid_transfer.arms()[0].evals
    assert {name: (t.rows, t.cols) for name, t in evals.items()} == {"2x1": (2, 1), "3x1": (3, 1)}


def test_kl_penalty_logs_kl_only_with_beta(capsys):
    result = repro("kl_penalty", steps=1, val_size=8)
    rows = {r["arm"]: r for r in result["rows"]}
    assert set(rows) == {"beta 0", "beta 0.04"}
    assert "kl" in rows["beta 0.04"]["train"] and "kl" not in rows["beta 0"]["train"]
    assert rows["beta 0.04"]["beta"] == 0.04 and "final KL" in result["note"]


def test_dynamic_sampling_refills_the_first_batch_with_groups_with_unequal_rewards():
    """Both arms draw the same batches (same seed and data; seed 0's first batch has no group with
    unequal rewards, so neither arm's weights move before the second): refill keeps the batch's
    groups with unequal rewards and adds those of its rounds, while plain GRPO trains on the batch's
    own alone."""
    result = repro("dynamic_sampling", **SMALL)
    rows = {r["arm"]: r for r in result["rows"]}
    plain, refill = rows["plain"], rows["refill 4"]
    assert (plain["refill_rounds"], refill["refill_rounds"]) == (0, 4) and "dynamic/rounds" not in plain["train"]
    own = dynamic_sampling.informative(plain, True) * plain["B"]  # groups a step, as refill's kept
    kept, rounds = refill["train"]["dynamic/groups_kept"][0], refill["train"]["dynamic/rounds"][0]
    assert kept > own > 0 and rounds > 0 and (kept == refill["B"] or rounds == 4)
    assert refill["train"]["reward"] == plain["train"]["reward"]  # the batch's own completions, alike
    assert result["held"] is not None and "training steps/s" in result["note"]


def test_cli_names_the_claims(capsys):
    with pytest.raises(SystemExit):
        zoo_main(["repro", "no_such_claim"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("zoo repro: error: ") and "graded_reward" in line and "kl_penalty" in line


def test_an_option_of_the_transfer_claims_is_refused_by_the_others():
    with pytest.raises(ValueError, match="zoo repro kl_penalty takes no plot, probe_every"):
        repro("kl_penalty", probe_every=5, plot="curve.png")


def _tool_row(arm, seed, accuracy, calls=1.0, grounding=1.0):
    return {"arm": arm, "seed": seed, "after": {"accuracy": accuracy, "calls": calls, "grounding": grounding}}


def test_tool_use_verdict_needs_the_margin_and_the_spread():
    without = [_tool_row("without tool", s, a, 0.0, 0.0) for s, a in enumerate((0.5, 0.47, 0.53))]
    gain = without + [_tool_row("with tool", s, a) for s, a in enumerate((0.72, 0.75, 0.78))]
    held, note = tool_use.verdict(gain)
    assert held is True and "gap +0.250, needs > 0.100" in note and "1.00 of rows call it" in note
    # above chance, but not by MARGIN over the arm without the tool
    small = without + [_tool_row("with tool", s, a) for s, a in enumerate((0.56, 0.58, 0.6))]
    assert tool_use.verdict(small)[0] is False
    # a mean gain of 0.2 within a seed spread of 0.3 is not a gain
    spread = without + [_tool_row("with tool", s, a) for s, a in enumerate((0.4, 0.7, 1.0))]
    held, note = tool_use.verdict(spread)
    assert held is False and "needs > 0.300" in note
    assert tool_use.verdict(without) == (None, "needs both arms")


def test_tool_use_curve_windows_the_grpo_metrics():
    steps = [{"train/reward": r, "train/tools/calls": c} for r, c in ((0, 0), (1, 1), (1, 0.5), (0, 0.5))]
    assert tool_use.grpo_curve(steps, bins=2) == [
        {"steps": 2, "reward": 0.5, "calls": 0.5},
        {"steps": 4, "reward": 0.5, "calls": 0.5},
    ]
