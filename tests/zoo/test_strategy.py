"""End-to-end `Trainer.fit` with the GRPO strategy on a tiny policy: options, metrics,
micro-batching."""

from functools import partial
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch import Trainer

from callbacks import GRPOMetrics
from datamodules import PretextDataModule, SyntheticScenes
from tasks import Rotation
from zoo import GRPOStrategy, QwenVLPolicy
from zoo.grpo import functional as F
from zoo.training import micro_batches, pack_rows, plan_micro_batches, row_lengths

ADAMW = partial(torch.optim.AdamW, lr=1e-3)


def fit(
    steps: int = 2, val_size: int = 0, callbacks=(), batch_size: int = 4, accumulate: int = 1, optimizer=ADAMW, **grpo
):
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", optimizer=optimizer)
    data = PretextDataModule(
        SyntheticScenes(size=200),
        Rotation(labels="letters", answer_format="bare", format_weight=0.1),
        batch_size=batch_size,
        val_size=val_size,
    )
    settings = dict(num_generations=4, max_new_tokens=3) | grpo
    metrics = GRPOMetrics(summary=False)
    trainer = Trainer(
        max_steps=steps,
        strategy=GRPOStrategy(**settings),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[metrics, *callbacks],
        limit_val_batches=1.0 if val_size else 0,
        num_sanity_val_steps=0,
        val_check_interval=steps if val_size else None,
        accumulate_grad_batches=accumulate,
    )
    trainer.fit(policy, data)
    return trainer, policy


def params(policy):
    return {n: p.detach().clone() for n, p in policy.named_parameters()}


@pytest.mark.parametrize("loss_type", F.LOSSES)
def test_every_loss_type_trains(loss_type):
    trainer, policy = fit(loss_type=loss_type, epsilon=0.2 if loss_type != "gspo" else 3e-4)
    logged = trainer.callback_metrics
    assert trainer.global_step == 2
    for name in (
        "train/reward",
        "train/reward/rotation/accuracy",
        "train/reward/rotation/format",
        "train/grpo/loss",
        "train/grpo/clip_frac",
        "train/grpo/entropy",
        "train/grpo/adv_std",
        "train/grpo/frac_zero_std",
        "train/grpo/completion_len",
        "perf/sample_s",
        "perf/score_s",
        "perf/train_s",
        "perf/tokens_per_s",
    ):
        assert name in logged and torch.isfinite(logged[name]), name


def test_reference_kl_iterations_and_options_together():
    trainer, _ = fit(
        beta=0.04,
        kl_estimator="k3",
        num_iterations=2,
        scale_rewards="batch",
        mask_truncated=True,
        micro_batch_size=5,
        beta_schedule="linear",
        epsilon_high=0.28,
        entropy_coef=0.01,
    )
    # two optimizer steps per rollout: max_steps counts optimizer steps
    assert trainer.global_step == 2
    logged = trainer.callback_metrics
    assert "train/grpo/kl" in logged and torch.isfinite(logged["train/grpo/kl"])


def test_reference_kl_is_zero_before_the_first_update():
    """At step 0 the policy equals its reference, so the k3 estimate is exactly 0."""
    trainer, _ = fit(steps=1, beta=0.1)
    assert trainer.callback_metrics["train/grpo/kl"].item() == pytest.approx(0.0, abs=1e-6)


def test_zero_variance_filter_trains_even_when_no_group_is_informative():
    trainer, _ = fit(filter_zero_variance=True, micro_batch_size=3)
    assert trainer.global_step == 2


def test_micro_batch_plan():
    rows = torch.tensor([0, 1, 4, 5, 6])
    plan = plan_micro_batches(micro_batches(rows, 2), rows, count=3)
    assert [chunk.tolist() for chunk, _ in plan] == [[0, 1], [4, 5], [6]]
    assert [live for _, live in plan] == [1.0, 1.0, 1.0]
    # a rank with fewer chunks than its peers re-runs one row with weight 0, so every rank runs as
    # many passes
    padded = plan_micro_batches(micro_batches(torch.tensor([3]), 2), torch.tensor([3]), count=2)
    assert [(chunk.tolist(), live) for chunk, live in padded] == [([3], 1.0), ([3], 0.0)]
    # nothing left after filtering: no chunk at all on a single device (no peer to keep in step
    # with)
    empty = torch.tensor([], dtype=torch.long)
    assert micro_batches(empty, 2) == [] and plan_micro_batches([], empty, count=0) == []
    assert len(micro_batches(torch.arange(5), None)) == 1


def test_token_budget_packs_rows_longest_first_within_the_padded_budget():
    rows = torch.tensor([10, 11, 12, 13, 14, 15])
    lengths = torch.tensor([[2, 1], [8, 4], [3, 3], [2, 2], [9, 9], [1, 1]])  # prompt, completion
    # longest first: 14 (18 tokens > 16) alone, 11 (12): 2 x 18 > 16, 12 (6): 2 x 12 > 16, 13 (4)
    # joins 12 (2 x 6 = 12), 10 (3) would make 3 x 6 = 18 > 16 so opens a fourth, and 15 joins it
    packed = [chunk.tolist() for chunk in pack_rows(rows, lengths, budget=16)]
    assert packed == [[14], [11], [12, 13], [10, 15]]
    # micro_batch_size caps the rows of each pack too
    capped = [chunk.tolist() for chunk in pack_rows(rows, lengths, budget=100, size=2)]
    assert capped == [[11, 14], [12, 13], [10, 15]]
    assert sorted(sum(capped, [])) == rows.tolist()


def test_row_lengths_are_the_trimmed_prompt_and_completion():
    rollout = SimpleNamespace(
        prompts=SimpleNamespace(tensors={"attention_mask": torch.tensor([[0, 1, 1], [1, 1, 1]])}),
        num_generations=2,
        completion_mask=torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 0]], dtype=torch.bool),
    )
    assert row_lengths(rollout, torch.tensor([3, 0, 1, 2])).tolist() == [[3, 1], [2, 2], [2, 1], [3, 3]]


def test_micro_batching_gives_the_same_update():
    _, whole = fit(steps=2, micro_batch_size=None)
    _, chunked = fit(steps=2, micro_batch_size=3)
    for (name, a), b in zip(params(whole).items(), params(chunked).values(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=name)


def test_accumulating_two_half_batches_equals_one_full_batch():
    # plain SGD without clipping: the update is proportional to the gradient, so its scale is
    # checked too
    settings = dict(steps=2, entropy_coef=0.05, max_grad_norm=None, optimizer=partial(torch.optim.SGD, lr=0.5))
    trainer, half = fit(batch_size=2, accumulate=2, **settings)
    assert trainer.global_step == 2  # optimizer steps, not batches
    _, full = fit(batch_size=4, **settings)
    for (name, a), b in zip(params(full).items(), params(half).values(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=name)


def test_accumulation_and_several_iterations_do_not_mix():
    with pytest.raises(ValueError, match="accumulate_grad_batches"):
        fit(steps=1, accumulate=2, num_iterations=2)


def test_an_update_changes_the_policy():
    torch.manual_seed(0)
    before = QwenVLPolicy("tiny:qwen2_5_vl")
    before.configure_model()
    _, after = fit(steps=2, entropy_coef=0.05)  # the entropy bonus guarantees a gradient
    changed = [n for n, p in params(after).items() if not torch.equal(p, params(before)[n])]
    assert changed


def test_validation_logs_accuracy_per_task():
    trainer, _ = fit(steps=1, val_size=8)
    logged = trainer.callback_metrics
    assert {"val/accuracy", "val/rotation/accuracy", "val/reward"} <= set(logged)
    assert 0.0 <= logged["val/accuracy"].item() <= 1.0


@pytest.mark.parametrize(
    "bad",
    [
        dict(num_generations=1),
        dict(loss_type="ppo"),
        dict(scale_rewards="rank"),
        dict(kl_estimator="k5"),
        dict(top_p=0.0),
        dict(num_iterations=0),
        dict(micro_batch_size=0),
        dict(beta_schedule="step"),
    ],
)
def test_bad_settings_fail_at_construction(bad):
    with pytest.raises(ValueError):
        GRPOStrategy(**bad)


def test_single_device_strategy_refuses_several_devices():
    trainer = Trainer(accelerator="cpu", devices=2, strategy=GRPOStrategy(), logger=False)
    with pytest.raises(ValueError, match="GRPODDPStrategy"):
        trainer.strategy.setup_environment()


def poison_first_loss(monkeypatch, calls: int):
    """Make the first ``calls`` aggregated losses NaN (as a diverged model or a bad reward
    would)."""
    aggregate, seen = F.aggregate, []

    def nan_first(*args, **kwargs):
        seen.append(1)
        loss = aggregate(*args, **kwargs)
        return loss * float("nan") if len(seen) <= calls else loss

    monkeypatch.setattr(F, "aggregate", nan_first)


def initial_params():
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl")
    policy.configure_model()
    return params(policy)


def test_a_non_finite_loss_skips_the_update_and_spares_the_optimizer(monkeypatch):
    before = initial_params()
    poison_first_loss(monkeypatch, calls=1)
    trainer, policy = fit(steps=1, entropy_coef=0.05)
    assert trainer.global_step == 1  # the skipped step still counts
    assert trainer.callback_metrics["train/grpo/skipped_steps"] == 1
    assert all(torch.equal(p, before[n]) for n, p in params(policy).items())
    assert not policy.optimizers().optimizer.state  # no moment was touched by the NaN gradient


def test_training_goes_on_after_a_skipped_step(monkeypatch):
    before = initial_params()
    poison_first_loss(monkeypatch, calls=1)
    trainer, policy = fit(steps=2, entropy_coef=0.05)
    after = params(policy)
    assert all(torch.isfinite(p).all() for p in after.values())
    assert any(not torch.equal(p, before[n]) for n, p in after.items())
    assert trainer.callback_metrics["train/grpo/skipped_steps"] == 0  # the last logged step was clean
