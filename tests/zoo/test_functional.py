"""GRPO math against hand-computed numbers."""

import math

import pytest
import torch
from torch.testing import assert_close

from zoo.grpo import functional as F


def test_equal_rewards_give_zero_advantage():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    adv = F.group_advantages(rewards, eps=1e-12)
    assert torch.equal(adv[0], torch.zeros(3))
    # second group: mean 1, sample std 1 -> (-1, 0, 1)
    assert_close(adv[1], torch.tensor([-1.0, 0.0, 1.0]), atol=1e-6, rtol=0)


def test_advantage_scales():
    rewards = torch.tensor([[0.0, 2.0], [1.0, 1.0]])
    # centred: [[-1, 1], [0, 0]]
    assert_close(F.group_advantages(rewards, "none"), torch.tensor([[-1.0, 1.0], [0.0, 0.0]]))
    # batch std of (0, 2, 1, 1): mean 1, squared deviations 1+1+0+0, unbiased var 2/3
    batch_std = math.sqrt(2 / 3)
    expected = torch.tensor([[-1.0, 1.0], [0.0, 0.0]]) / (batch_std + 1e-4)
    assert_close(F.group_advantages(rewards, "batch"), expected)
    # group std of (0, 2) is sqrt(2)
    assert_close(F.group_advantages(rewards, "group")[0], torch.tensor([-1.0, 1.0]) / (math.sqrt(2) + 1e-4))
    with pytest.raises(ValueError, match="scale"):
        F.group_advantages(rewards, "rank")


def test_zero_std_groups():
    rewards = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.5, 0.5]])
    assert F.zero_std_groups(rewards).tolist() == [True, False, True]


def test_clipped_surrogate_by_hand():
    # ratios exp(log 1.5) = 1.5 and exp(log 0.5) = 0.5 with epsilon 0.2
    old = torch.zeros(2, 1)
    logps = torch.log(torch.tensor([[1.5], [0.5]]))
    mask = torch.ones(2, 1)
    # positive advantage, ratio 1.5 -> clipped at 1.2: loss -1.2; negative advantage, ratio 0.5 ->
    # clipped at 0.8: min(0.5 * -1, 0.8 * -1) = -0.8 -> loss 0.8
    loss, clipped = F.per_token_loss(logps, old, torch.tensor([1.0, -1.0]), mask, "grpo", 0.2)
    assert_close(loss, torch.tensor([[-1.2], [0.8]]))
    assert clipped.tolist() == [[True], [True]]
    # inside the trust region nothing is clipped and the loss is -ratio * A
    loss, clipped = F.per_token_loss(
        torch.log(torch.tensor([[1.1]])), torch.zeros(1, 1), torch.tensor([2.0]), torch.ones(1, 1), "grpo", 0.2
    )
    assert_close(loss, torch.tensor([[-2.2]]))
    assert not clipped.any()


def test_clip_higher_widens_upper_range_only():
    logps = torch.log(torch.tensor([[1.25], [0.7]]))
    loss, _ = F.per_token_loss(
        logps, torch.zeros(2, 1), torch.tensor([1.0, -1.0]), torch.ones(2, 1), "dapo", epsilon=0.2, epsilon_high=0.28
    )
    # 1.25 < 1.28 is not clipped: -1.25; 0.7 < 0.8 is clipped low: 0.8
    assert_close(loss, torch.tensor([[-1.25], [0.8]]))


def test_dual_clip_bounds_the_loss_of_negative_advantages_by_hand():
    # rows: (ratio 4, A -1), (ratio 2, A -1), (ratio 4, A +1), (ratio 0.5, A -1); epsilon 0.2, c 3
    logps = torch.log(torch.tensor([[4.0], [2.0], [4.0], [0.5]])).requires_grad_()
    adv = torch.tensor([-1.0, -1.0, 1.0, -1.0])
    loss, clipped = F.per_token_loss(logps, torch.zeros(4, 1), adv, torch.ones(4, 1), "dapo", 0.2, clip_ratio_c=3.0)
    # PPO alone: -min(-4, -1.2) = 4 -> bounded at -c * A = 3; -min(-2, -1.2) = 2 < 3 stays;
    # positive advantages are never bounded: -min(4, 1.2) = -1.2; -min(-0.5, -0.8) = 0.8 (clip low)
    assert_close(loss.detach(), torch.tensor([[3.0], [2.0], [-1.2], [0.8]]))
    assert clipped.flatten().tolist() == [True, False, True, True]
    loss.sum().backward()
    # d(-r * A)/d logp = -A * r: 0 at the bound, 2 for the second row, 0 where the clip is active
    assert_close(logps.grad, torch.tensor([[0.0], [2.0], [0.0], [0.0]]))
    # the pure function bounds only where A < 0 and the loss is above -c * A; padding is not flagged
    bounded, where = F.dual_clip(torch.tensor([[5.0, 1.0], [5.0, 5.0]]), torch.tensor([-1.0, 2.0]), 3.0)
    assert_close(bounded, torch.tensor([[3.0, 1.0], [5.0, 5.0]]))
    assert where.tolist() == [[True, False], [False, False]]
    _, clipped = F.per_token_loss(logps, torch.zeros(4, 1), adv, torch.zeros(4, 1), "dapo", clip_ratio_c=3.0)
    assert not clipped.any()


def test_on_policy_gradient_is_minus_advantage():
    logps = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, _ = F.per_token_loss(logps, logps.detach(), torch.tensor([3.0]), torch.ones(1, 2), "grpo")
    loss.sum().backward()
    # d(-ratio * A)/d logp = -ratio * A = -3 at ratio 1
    assert_close(logps.grad, torch.tensor([[-3.0, -3.0]]))


def test_gspo_uses_one_sequence_ratio():
    logps = torch.tensor([[math.log(2.0), 0.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    ratio = F.sequence_ratio(logps, torch.zeros(1, 3), mask)
    # mean log-ratio over the two real tokens: log(2) / 2 -> ratio sqrt(2) on every position
    assert_close(ratio, torch.full((1, 3), math.sqrt(2.0)))


def test_gpg_is_reinforce():
    logps = torch.tensor([[-0.5, -1.5]])
    loss, clipped = F.per_token_loss(logps, logps - 3.0, torch.tensor([2.0]), torch.ones(1, 2), "gpg")
    assert_close(loss, torch.tensor([[1.0, 3.0]]))
    assert not clipped.any()


def test_kl_estimators_by_hand():
    logps = torch.tensor([[math.log(0.5)]])
    ref = torch.tensor([[math.log(0.25)]])
    log_r = math.log(0.5)  # log(ref / pi)
    assert_close(F.kl_penalty(logps, ref, "k1"), torch.tensor([[-log_r]]))
    assert_close(F.kl_penalty(logps, ref, "k2"), torch.tensor([[0.5 * log_r**2]]))
    assert_close(F.kl_penalty(logps, ref, "k3"), torch.tensor([[0.5 - log_r - 1]]))
    assert F.kl_penalty(logps, logps, "k3").item() == 0.0
    with pytest.raises(ValueError):
        F.kl_penalty(logps, ref, "k4")


def test_aggregation_modes_by_hand():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    # sequence-level types: row means (2, 4), summed -> 6; token-level ones: token sum 1 + 2 + 3 + 4
    # = 10
    for loss_type in ("grpo", "gspo"):
        assert F.aggregate(values, mask, loss_type, 2.0).item() == 3.0
    for loss_type in ("dr_grpo", "dapo", "bnpo", "gpg"):
        assert F.aggregate(values, mask, loss_type, 4.0).item() == 2.5


def test_window_normalisers_by_hand():
    counts = torch.tensor([[2.0, 5.0], [6.0, 3.0]])  # kept rows and tokens of a window's two batches
    # one batch holding both: 8 rows, 8 tokens
    assert F.window_normalisers("grpo", counts, 4) == [8.0, 8.0]
    assert F.window_normalisers("gspo", counts, 4) == [8.0, 8.0]
    assert F.window_normalisers("dr_grpo", counts, 4) == [32.0, 32.0]  # 8 rows x 4 max new tokens
    assert F.window_normalisers("dapo", counts, 4) == [8.0, 8.0]
    assert F.window_normalisers("gpg", counts, 4) == [8.0, 8.0]
    # bnpo: each batch's own token mean, averaged over the 2 batches
    assert F.window_normalisers("bnpo", counts, 4) == [10.0, 6.0]
    # nothing kept anywhere: divisors stay 1 (the loss is 0), never 0
    assert F.window_normalisers("dapo", torch.zeros(1, 2), 4) == [1.0]


def test_window_of_sums_equals_one_batch():
    torch.manual_seed(0)
    values, mask = torch.randn(6, 5), (torch.rand(6, 5) > 0.3).float()
    halves = [(values[:2], mask[:2]), (values[2:], mask[2:])]
    counts = torch.tensor([[len(m), float(m.sum())] for _, m in halves])
    for loss_type in ("grpo", "dr_grpo", "dapo", "gspo", "gpg"):
        whole = F.aggregate(values, mask, loss_type, F.window_normalisers(loss_type, counts.sum(0, keepdim=True), 5)[0])
        divisors = F.window_normalisers(loss_type, counts, 5)
        parts = sum(F.aggregate(v, m, loss_type, d) for (v, m), d in zip(halves, divisors, strict=True))
        assert_close(parts, whole)


def test_losses_register_themselves():
    @F.register_loss("test_sum", F.by_rows)
    def summed(logps, old_logps, advantages, mask, epsilon=0.2, epsilon_high=None):
        return -advantages[:, None] * logps, torch.zeros_like(logps, dtype=torch.bool)

    try:
        assert F.LOSSES["test_sum"].per_token is summed and F.LOSSES["test_sum"].off_policy
        loss, _ = F.per_token_loss(
            torch.ones(1, 2), torch.ones(1, 2), torch.tensor([2.0]), torch.ones(1, 2), "test_sum"
        )
        assert_close(loss, torch.full((1, 2), -2.0))
        with pytest.raises(ValueError, match="already registered"):
            F.register_loss("test_sum", F.by_rows)(summed)
    finally:
        del F.LOSSES["test_sum"]
    with pytest.raises(ValueError, match="loss_type must be one of"):
        F.per_token_loss(torch.ones(1, 1), torch.ones(1, 1), torch.ones(1), torch.ones(1, 1), "test_sum")


def test_schedules():
    assert F.scheduled(0.04, "constant", 0.7) == 0.04
    assert F.scheduled(0.04, "linear", 0.25) == pytest.approx(0.03)
    assert F.scheduled(0.04, "cosine", 0.5) == pytest.approx(0.02)
    assert F.scheduled(0.04, "cosine", 1.0) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        F.scheduled(0.04, "step", 0.5)
