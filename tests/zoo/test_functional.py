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
    # positive advantage, ratio 1.5 -> clipped at 1.2: loss -1.2; negative advantage, ratio 0.5 -> clipped
    # at 0.8: min(0.5 * -1, 0.8 * -1) = -0.8 -> loss 0.8
    loss, clipped = F.per_token_loss(logps, old, torch.tensor([1.0, -1.0]), mask, "grpo", 0.2)
    assert_close(loss, torch.tensor([[-1.2], [0.8]]))
    assert clipped.tolist() == [[True], [True]]
    # inside the trust region nothing is clipped and the loss is -ratio * A
    loss, clipped = F.per_token_loss(torch.log(torch.tensor([[1.1]])), torch.zeros(1, 1), torch.tensor([2.0]),
                                     torch.ones(1, 1), "grpo", 0.2)
    assert_close(loss, torch.tensor([[-2.2]]))
    assert not clipped.any()


def test_clip_higher_widens_upper_range_only():
    logps = torch.log(torch.tensor([[1.25], [0.7]]))
    loss, _ = F.per_token_loss(logps, torch.zeros(2, 1), torch.tensor([1.0, -1.0]), torch.ones(2, 1),
                               "dapo", epsilon=0.2, epsilon_high=0.28)
    # 1.25 < 1.28 is not clipped: -1.25; 0.7 < 0.8 is clipped low: 0.8
    assert_close(loss, torch.tensor([[-1.25], [0.8]]))


def test_on_policy_gradient_is_minus_advantage():
    logps = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, _ = F.per_token_loss(logps, logps.detach(), torch.tensor([3.0]), torch.ones(1, 2), "grpo")
    loss.sum().backward()
    # d(-ratio * A)/d logp = -ratio * A = -3 at ratio 1
    assert_close(logps.grad, torch.tensor([[-3.0, -3.0]]))


def test_gspo_uses_one_sequence_ratio():
    logps = torch.tensor([[math.log(2.0), 0.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    ratio = F.importance_ratio(logps, torch.zeros(1, 3), mask, "gspo")
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
    # grpo: row means (2, 4), summed, divided by 2 rows -> 3
    assert F.aggregate(values, mask, "grpo", F.loss_normaliser("grpo", 2, 4, 4, 3)).item() == 3.0
    # dapo: token sum 10 over 4 tokens -> 2.5
    assert F.aggregate(values, mask, "dapo", F.loss_normaliser("dapo", 2, 4, 4, 3)).item() == 2.5
    # bnpo: this rank's 4 tokens -> 2.5 regardless of the global count
    assert F.aggregate(values, mask, "bnpo", F.loss_normaliser("bnpo", 2, 4, 100, 3)).item() == 2.5
    # dr_grpo: token sum 10 over 2 rows x 3 max tokens -> 10/6
    assert F.aggregate(values, mask, "dr_grpo", F.loss_normaliser("dr_grpo", 2, 4, 4, 3)).item() == \
        pytest.approx(10 / 6)


@pytest.mark.parametrize("loss_type", F.LOSS_TYPES)
def test_micro_batches_add_up_to_the_full_batch(loss_type):
    torch.manual_seed(0)
    values = torch.randn(6, 5)
    mask = (torch.rand(6, 5) > 0.3).float()
    mask[:, 0] = 1
    norm = F.loss_normaliser(loss_type, 6, float(mask.sum()), float(mask.sum()), 5)
    whole = F.aggregate(values, mask, loss_type, norm)
    parts = sum(F.aggregate(values[i:i + 2], mask[i:i + 2], loss_type, norm) for i in range(0, 6, 2))
    assert_close(parts, whole)


def test_schedules():
    assert F.scheduled(0.04, "constant", 0.7) == 0.04
    assert F.scheduled(0.04, "linear", 0.25) == pytest.approx(0.03)
    assert F.scheduled(0.04, "cosine", 0.5) == pytest.approx(0.02)
    assert F.scheduled(0.04, "cosine", 1.0) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        F.scheduled(0.04, "step", 0.5)
