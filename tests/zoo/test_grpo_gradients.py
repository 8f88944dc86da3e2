"""The GRPO strategy's gradients, pinned against GRPO written again from the formulas
(`grpo_reference`).

Each option's test first checks that the reference gradient with the option differs from the
gradient the strategy would produce if it ignored or inverted the option, then that the strategy's
gradient (recorded by the optimizer, after clipping; plain SGD, so the scale counts) equals the
reference, step by step.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch

from tests.zoo import grpo_reference as R
from zoo import GRPOStrategy
from zoo.grpo import functional as F
from zoo.grpo.window import no_grad_log_probs

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "gspo", "gpg")  # the ones the reference knows
ROOT = Path(__file__).parents[2]


def grads(records) -> list:
    return [r["grad"] if isinstance(r, dict) else r for r in records]


def assert_same(actual, expected) -> None:
    actual, expected = grads(actual), grads(expected)
    assert len(actual) == len(expected)
    for step, (a, e) in enumerate(zip(actual, expected, strict=True)):
        torch.testing.assert_close(a, e, atol=1e-8, rtol=1e-5, msg=lambda m, s=step: f"optimizer step {s}: {m}")


def differs(a, b) -> bool:
    """Whether two gradient histories differ by far more than `assert_same` tolerates."""
    a, b = grads(a), grads(b)
    if len(a) != len(b):
        return True
    return any(float((x - y).norm()) > 1e-2 * float(y.norm()) + 1e-6 for x, y in zip(a, b, strict=True))


def check(settings: dict, ignored: dict, **run) -> R.Run:
    """The strategy with ``settings`` trains as the reference does, and the reference with
    ``ignored`` (what the strategy would do if it dropped or inverted the option) is told apart from
    it."""
    expected = R.reference(settings, **run)
    assert differs(expected, R.reference(settings | ignored, **run)), "the case cannot see the option"
    result = R.train(settings, **run)
    assert_same(result.grads, expected)
    return result


KL = dict(beta=0.2)
ITERATE = dict(num_iterations=2, epsilon=0.05)
OPTIONS = {  # name: (settings, what the strategy would use if it ignored or inverted the option)
    "num_generations": (dict(num_generations=3), dict(num_generations=4)),
    "temperature": (dict(temperature=0.7), dict(temperature=1.0)),
    "max_new_tokens": (dict(max_new_tokens=3, loss_type="dr_grpo"), dict(max_new_tokens=4)),
    "scale_rewards=batch": (dict(scale_rewards="batch"), dict(scale_rewards="group")),
    "scale_rewards=none": (dict(scale_rewards="none"), dict(scale_rewards="group")),
    "scale_rewards=gpg": (dict(scale_rewards="gpg", loss_type="gpg"), dict(scale_rewards="none")),
    "epsilon": (ITERATE, dict(epsilon=0.2)),
    "epsilon_high": (ITERATE | dict(epsilon_high=0.3), dict(epsilon_high=None)),
    "beta": (KL, dict(beta=0.0)),
    "beta-sign": (KL | dict(kl_estimator="k1"), dict(beta=-0.2)),
    "kl_estimator=k1": (KL | dict(kl_estimator="k1"), dict(kl_estimator="k3")),
    "kl_estimator=k2": (KL | dict(kl_estimator="k2"), dict(kl_estimator="k3")),
    "kl_estimator=k3": (KL, dict(kl_estimator="k2")),
    "beta_schedule=linear": (dict(beta=0.5, beta_schedule="linear"), dict(beta_schedule="constant")),
    "beta_schedule=cosine": (dict(beta=0.5, beta_schedule="cosine"), dict(beta_schedule="constant")),
    "kl_bias_correction": (KL | ITERATE | dict(kl_bias_correction=True), dict(kl_bias_correction=False)),
    # the KL term pulls some tokens of negative advantage up, so their ratio passes c
    "clip_ratio_c": (ITERATE | dict(beta=2.0, clip_ratio_c=1.2), dict(clip_ratio_c=None)),
    "mini_batches": (dict(mini_batches=2), dict(mini_batches=1)),
    "num_iterations": (dict(num_iterations=2), dict(num_iterations=1)),
    "mask_truncated": (dict(mask_truncated=True), dict(mask_truncated=False)),
    "filter_zero_variance": (dict(filter_zero_variance=True), dict(filter_zero_variance=False)),
    "filter_zero_variance-kl": (
        KL | dict(filter_zero_variance=True, loss_type="dapo"),
        dict(filter_zero_variance=False),
    ),
    "entropy_coef": (dict(entropy_coef=0.1), dict(entropy_coef=0.0)),
    "max_grad_norm": (dict(max_grad_norm=0.02), dict(max_grad_norm=None)),
}


@pytest.mark.parametrize("name", OPTIONS)
def test_each_option_changes_the_gradient_as_its_formula_says(name):
    settings, ignored = OPTIONS[name]
    check(settings, ignored)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_each_loss_type_on_policy_with_kl_entropy_and_micro_batches(loss_type):
    settings = dict(loss_type=loss_type, beta=0.2, entropy_coef=0.1, micro_batch_size=3)
    # on one batch at ratio 1 bnpo and gpg equal dapo, and gspo equals grpo: each is told from
    # another type
    run = check(settings, dict(loss_type="dapo" if loss_type in ("grpo", "gspo") else "grpo"))
    assert max(run.policy.chunks) == 3  # micro_batch_size reached the forward passes


@pytest.mark.parametrize("loss_type", [t for t in LOSS_TYPES if F.LOSSES[t].off_policy])
def test_each_loss_type_reuses_its_samples_with_importance_ratios(loss_type):
    # the second iteration sees ratios away from 1 and clipping; old log-probs recomputed (ratio 1)
    # differ
    check(dict(loss_type=loss_type, num_iterations=2, epsilon=0.1, filter_zero_variance=True), dict(epsilon=1e9))


MINI_BATCHES = [t for t in LOSS_TYPES if F.LOSSES[t].off_policy]


@pytest.mark.parametrize("loss_type", MINI_BATCHES)
def test_mini_batches_update_on_shares_of_one_rollout(loss_type):
    # two rollouts of 4 prompts, each 2 epochs x 2 mini-batches: the second epoch's ratios are
    # against the sampling policy (the table's rows are independent, so within an epoch they are
    # 1); each mini-batch has its own normaliser, the batch std is the rollout's
    settings = dict(
        loss_type=loss_type,
        mini_batches=2,
        num_iterations=2,
        epsilon=0.05,
        scale_rewards="batch",
        filter_zero_variance=True,
        micro_batch_size=3,
        beta=0.2,
        entropy_coef=0.1,
    )
    run = check(settings, dict(mini_batches=1), steps=8)
    assert len(run.grads) == 8  # every optimizer step counts in global_step


def test_mini_batches_split_whole_groups_as_evenly_as_possible():
    # 4 groups in 3 mini-batches: 2, 1 and 1 groups; each step normalised by its own rows
    settings = dict(mini_batches=3, loss_type="dr_grpo", mask_truncated=True)
    run = check(settings, dict(mini_batches=1), steps=3)
    assert run.policy.chunks == [8, 4, 4]


@pytest.mark.parametrize("guidance", ["srft", "luffy"])
def test_mini_batches_of_a_hybrid_keep_its_demonstrations_in_their_groups(guidance):
    # SRFT's SFT term is normalised by the demonstration tokens of each step's mini-batch
    settings = dict(guidance=(guidance, {}), mini_batches=2, num_iterations=2, epsilon=0.05, micro_batch_size=3)
    check(settings, dict(mini_batches=1), steps=4)


def test_mini_batches_take_old_log_probs_once_before_the_first_update():
    # the table's rows are independent, so a later mini-batch's ratio is 1 either way: count the
    # passes instead (one per piece of the rollout, before any update)
    with mock.patch("zoo.grpo.strategy.no_grad_log_probs", wraps=no_grad_log_probs) as calls:
        run = R.train(dict(mini_batches=2), steps=2)
    assert [c.kwargs["reference"] for c in calls.call_args_list] == [False, False]
    assert [len(c.args[2][0][0]) for c in calls.call_args_list] == [8, 8]  # each mini-batch's 2 groups
    assert len(run.grads) == 2


def test_several_updates_refuse_accumulation_and_losses_without_a_ratio():
    with pytest.raises(ValueError, match="gpg.*mini_batches"):
        GRPOStrategy(loss_type="gpg", mini_batches=2)
    with pytest.raises(ValueError, match="no importance ratio"):
        GRPOStrategy(loss_type="gpg", clip_ratio_c=3.0)
    with pytest.raises(ValueError, match="clip_ratio_c must be > 1"):
        GRPOStrategy(clip_ratio_c=1.0)
    with pytest.raises(ValueError, match="accumulate_grad_batches"):
        R.train(dict(mini_batches=2), steps=2, batch_size=2, accumulate=2)


def test_micro_batching_and_a_filtered_batch_keep_the_whole_batch_normaliser():
    settings = dict(loss_type="dr_grpo", filter_zero_variance=True, micro_batch_size=3, mask_truncated=True)
    run = check(settings, dict(filter_zero_variance=False))
    assert sorted(set(run.policy.chunks)) == [2, 3]  # 8 kept rows in chunks of 3, 3, 2


BUDGET = 30  # padded tokens per pass; the longest rows (12 prompt + 4 completion tokens) fit alone


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_token_budget_micro_batches_give_the_one_batch_update(loss_type, caplog):
    settings = dict(loss_type=loss_type, beta=0.2, entropy_coef=0.1, max_tokens_per_micro_batch=BUDGET)
    run = check(settings, dict(loss_type="dapo" if loss_type in ("grpo", "gspo") else "grpo"))
    # prompts of 1-12 tokens and completions of 1-4: 1 to 7 rows a pass, each within the budget
    assert max(run.policy.passes) <= BUDGET and min(run.policy.chunks) == 1 and max(run.policy.chunks) >= 4
    assert sum(run.policy.chunks) == 2 * 16  # every row of both steps, once


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "gspo"])
def test_packed_token_budget_counts_real_tokens_and_gives_the_one_batch_update(loss_type):
    """A policy that packs its micro-batches (``pack_sequences``) is charged the sum of its rows'
    real tokens: more rows fit a pass than padded, and the update is the same."""
    settings = dict(loss_type=loss_type, beta=0.2, entropy_coef=0.1, max_tokens_per_micro_batch=BUDGET)
    padded = R.train(settings)
    run = check(settings | dict(pack_sequences=True), dict(loss_type="dapo" if loss_type != "dapo" else "grpo"))
    assert max(run.policy.passes) <= BUDGET and sum(run.policy.chunks) == 2 * 16
    assert len(run.policy.chunks) < len(padded.policy.chunks)  # fewer passes: no padding charged


def test_a_row_longer_than_the_token_budget_runs_alone_and_is_logged_once(caplog):
    settings = dict(loss_type="dapo", max_new_tokens=6, micro_batch_size=3, max_tokens_per_micro_batch=16)
    run = check(settings, dict(loss_type="grpo"))
    over = [n for n, tokens in zip(run.policy.chunks, run.policy.passes, strict=True) if tokens > 16]
    assert over and set(over) == {1}
    assert max(run.policy.chunks) <= 3  # micro_batch_size bounds the short rows' passes too
    assert sum("longer than max_tokens_per_micro_batch" in r.message for r in caplog.records) <= 1


def test_sampling_settings_reach_the_policy_and_log_probs_are_untruncated():
    settings = dict(num_generations=3, max_new_tokens=5, temperature=0.8, top_p=0.9)
    run = R.train(settings)
    assert run.policy.sampled[0] == settings
    # top_p shapes sampling only: the log-probs are those of the full tempered softmax (as in TRL
    # and verl)
    assert_same(run.grads, R.reference(settings))
    assert run.policy.reference_calls == 0  # beta 0 loads and runs no reference model


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("filtered", [False, True])
def test_accumulating_two_batches_equals_one_batch_holding_their_groups(loss_type, filtered):
    settings = dict(
        loss_type=loss_type,
        filter_zero_variance=filtered,
        scale_rewards="batch",
        beta=0.2,
        entropy_coef=0.1,
        micro_batch_size=3,
    )
    run = R.train(settings, steps=2, batch_size=2, accumulate=2)
    one_batch = R.reference(settings, steps=2, batch_size=4)
    if F.LOSSES[loss_type].per_batch:  # bnpo: by definition the mean of each batch's token mean
        per_batch = R.reference(settings, steps=2, batch_size=2, accumulate=2)
        assert differs(per_batch, one_batch) or not filtered  # unfiltered, the batches hold as many tokens
        one_batch = per_batch
    assert_same(run.grads, one_batch)


def test_logged_grad_norm_loss_and_beta_are_the_true_values():
    settings = dict(num_iterations=2, beta=0.5, beta_schedule="linear", epsilon=0.05)
    run = R.train(settings, steps=4, metrics=True)
    expected = R.reference(settings, steps=4)
    assert_same(run.grads, expected)
    last = expected[2:]  # the last batch: optimizer steps 2 and 3
    assert run.metrics["train/grpo/grad_norm"] == pytest.approx(sum(r["norm"] for r in last) / 2, rel=1e-5)
    assert run.metrics["train/grpo/loss"] == pytest.approx(sum(r["loss"] for r in last) / 2, rel=1e-4)
    assert run.metrics["train/grpo/beta"] == pytest.approx(0.5 * ((1 - 2 / 4) + (1 - 3 / 4)) / 2)
    assert run.metrics["train/grpo/skipped_steps"] == 0


def test_a_skipped_step_is_counted_once(monkeypatch):
    aggregate, calls = F.aggregate, []

    def nan_first(*args, **kwargs):
        calls.append(1)
        return aggregate(*args, **kwargs) * (float("nan") if len(calls) == 1 else 1.0)

    monkeypatch.setattr(F, "aggregate", nan_first)
    run = R.train(dict(num_iterations=2), steps=2, metrics=True)
    assert run.grads[0] is None  # the NaN gradient was dropped, the second iteration stepped
    assert run.metrics["train/grpo/skipped_steps"] == 1


def test_grad_norm_is_not_logged_for_a_skipped_step(monkeypatch):
    aggregate = F.aggregate
    monkeypatch.setattr(F, "aggregate", lambda *args, **kwargs: aggregate(*args, **kwargs) * float("nan"))
    run = R.train(dict(), steps=1, metrics=True)
    assert "train/grpo/grad_norm" not in run.metrics and run.metrics["train/grpo/skipped_steps"] == 1


def test_a_loss_without_importance_ratio_refuses_several_iterations():
    with pytest.raises(ValueError, match="gpg.*num_iterations"):
        GRPOStrategy(loss_type="gpg", num_iterations=2)


# ---- two processes (gloo): rank 0 keeps no group in step 0, rank 1 none in step 1
# -----------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """Gradients of every 2-process case (`grpo_reference.RANK_CASES`), from 2 processes started as
    torchrun starts them (fresh interpreters: forked children of a process that used torch's threads
    hang)."""
    tmp = tmp_path_factory.mktemp("ranks")
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        GROUP_RANK="0",
        TORCHELASTIC_RUN_ID="grpo-test",
        OMP_NUM_THREADS="1",
    )
    logs = [open(tmp / f"rank{r}.log", "w+") for r in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.zoo.grpo_reference", str(tmp / "grads.pt")],
            env=env | {"RANK": str(r), "LOCAL_RANK": str(r)},
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for r, log in enumerate(logs)
    ]
    for proc in procs:
        proc.wait(timeout=300)
    for proc, log in zip(procs, logs, strict=True):
        log.seek(0)
        assert proc.returncode == 0, log.read()[-5000:]
    return torch.load(tmp / "grads.pt")


@pytest.mark.parametrize("name", R.RANK_CASES)
def test_two_processes_train_the_global_batch_as_one_process_does(two_ranks, name):
    settings = R.RANK_CASES[name]
    expected = R.reference(settings, steps=2, batch_size=4)
    assert_same(two_ranks[name], expected)
    assert_same(R.train(settings, steps=2, batch_size=4).grads, expected)


@pytest.mark.parametrize("name", R.DYNAMIC_RANK_CASES)
def test_two_processes_keep_the_groups_one_process_keeps(two_ranks, name):
    """Dynamic sampling: rank 0 holds no group with unequal rewards in step 0's batch and keeps both
    refill groups (and leaves the surplus one), rank 1 keeps none in step 1."""
    settings = R.DYNAMIC_RANK_CASES[name]
    assert_same(two_ranks[name], R.reference(settings, batches=R.KEPT[settings["refill_rounds"]]))


@pytest.mark.parametrize("name", R.MINI_BATCH_RANK_CASES)
def test_two_processes_take_their_share_of_each_mini_batch(two_ranks, name):
    settings, steps = R.MINI_BATCH_RANK_CASES[name]
    expected = R.reference(settings, steps=steps, batch_size=4, ranks=2)
    assert_same(two_ranks[name], expected)
    one_process = R.reference(settings, steps=steps, batch_size=4)
    if settings["mini_batches"] == 3:  # one process splits its 4 groups 2, 1, 1; two ranks 2, 2, 0
        assert differs(expected, one_process)
    assert_same(R.train(settings, steps=steps, batch_size=4).grads, one_process)


@pytest.mark.parametrize("name", R.ACCUMULATED_RANK_CASES)
def test_two_processes_accumulating_train_the_window_as_one_batch(two_ranks, name):
    settings = R.ACCUMULATED_RANK_CASES[name]
    per_batch = F.LOSSES[settings["loss_type"]].per_batch  # bnpo: each global batch of 2 prompts, then mean
    expected = R.reference(settings, steps=1, batch_size=2 if per_batch else 4, accumulate=2 if per_batch else 1)
    assert_same(two_ranks[name], expected)


class DapoOfMyOwn(F.Loss):
    """``dapo`` written as a user's own loss type: the same surrogate, the default (token)
    normaliser."""

    def per_token(self, logps, old_logps, advantages, mask, epsilon, epsilon_high):
        return F.per_token_loss(logps, old_logps, advantages, mask, "dapo", epsilon, epsilon_high)


class SequenceMeanDapo(DapoOfMyOwn):
    """The same surrogate averaged per row, then over rows: ``grpo``'s aggregation."""

    sequence_mean = True

    def normaliser(self, rows, tokens, max_new_tokens):
        return rows


def test_a_loss_type_of_your_own_trains_as_the_registered_one_it_equals():
    expected = R.reference(dict(loss_type="dapo"))
    assert differs(expected, R.reference(dict(loss_type="grpo"))), "the case cannot tell dapo from grpo"
    assert_same(R.train(dict(loss_type=DapoOfMyOwn())).grads, expected)
    assert_same(R.train(dict(loss_type=SequenceMeanDapo())).grads, R.reference(dict(loss_type="grpo")))


def test_a_loss_type_is_given_by_class_path_in_a_config():
    from tests.test_configs import parse_args

    path = f"{__name__}.DapoOfMyOwn"
    config = parse_args(
        [
            "--config",
            str(ROOT / "configs/quickstart.yaml"),
            "--trainer.strategy.init_args.loss_type",
            f'{{"class_path": "{path}"}}',
        ]
    ).config
    assert config.trainer.strategy.init_args.loss_type.class_path == path
    strategy = GRPOStrategy(loss_type=DapoOfMyOwn())
    assert F.find_loss(strategy.loss_type) is strategy.loss_type
    with pytest.raises(ValueError, match="no importance ratio"):
        GRPOStrategy(loss_type=type("OnPolicy", (DapoOfMyOwn,), {"off_policy": False})(), num_iterations=2)
