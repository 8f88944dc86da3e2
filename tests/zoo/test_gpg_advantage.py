"""GPG's corrected advantage (``scale_rewards: gpg``) against hand-computed numbers."""

import pytest
import torch
from torch.testing import assert_close

from zoo import GRPOStrategy
from zoo.grpo import functional as F
from zoo.grpo.window import window_advantages


def test_gpg_centres_without_std_and_scales_by_b_over_b_minus_m():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    # B = 4 groups, M = 2 of equal rewards -> alpha = 4 / 2 = 2; no division by any std
    expected = 2 * torch.tensor([[0.0, 0.0, 0.0], [-1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [2 / 3, -1 / 3, -1 / 3]])
    assert F.gpg_alpha(rewards) == 2.0
    assert_close(F.group_advantages(rewards, "gpg"), expected)


def test_gpg_alpha_is_capped_at_twenty():
    rewards = torch.zeros(25, 2)
    rewards[0, 1] = 1.0  # 24 of 25 groups equal: 1 - 24/25 = 0.04 is below GPG's floor 0.05
    assert F.gpg_alpha(rewards) == pytest.approx(20.0)
    assert F.gpg_alpha(torch.tensor([[0.0, 1.0]])) == 1.0  # no equal group: plain centring


def test_gpg_counts_the_groups_of_every_rank():
    # rank 0 holds one group with signal; rank 1 three equal ones: B = 4, M = 3, alpha = 4
    mine = [torch.tensor([[0.0, 1.0]])]
    everyone = torch.tensor([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    (adv,) = window_advantages(mine, "gpg", everyone, offset=0)
    assert_close(adv, torch.tensor([-2.0, 2.0]))
    # rank 0 alone would have alpha 1: the gathered count is what makes it 4
    assert_close(window_advantages(mine, "none")[0], torch.tensor([-0.5, 0.5]))


def test_gpg_leaves_groups_outside_the_batch_out_of_the_count():
    everyone = torch.tensor([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    members = torch.tensor([True, True, False])  # a refill group dynamic sampling did not keep
    (adv,) = window_advantages([everyone], "gpg", everyone, members=members)
    # B = 2, M = 1 -> alpha 2; the non-member group's rows get 0
    assert_close(adv, torch.tensor([-1.0, 1.0, 0.0, 0.0, 0.0, 0.0]))


def test_gpg_is_a_strategy_setting():
    assert GRPOStrategy(scale_rewards="gpg", loss_type="gpg").scale_rewards == "gpg"
    with pytest.raises(ValueError, match="scale_rewards"):
        GRPOStrategy(scale_rewards="gpg-ish")
