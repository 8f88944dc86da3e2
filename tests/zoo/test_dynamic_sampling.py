"""DAPO dynamic sampling (``refill_rounds``): which groups a batch keeps, the cap, and the update it
trains, pinned against GRPO written from the formulas (`grpo_reference`) on the batch of the kept
groups. The 2-process cases are in `test_grpo_gradients` (they share its processes)."""

import pytest
import torch

from tests.zoo import grpo_reference as R
from tests.zoo.test_grpo_gradients import assert_same, differs
from zoo import GRPOStrategy
from zoo.grpo.dynamic import first_groups

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "gspo", "gpg")


def test_the_first_groups_with_unequal_rewards_in_round_rank_position_order_are_kept():
    unequal = [
        torch.tensor([[False, True], [True, False]]),  # round 0: rank 0, rank 1
        torch.tensor([[True, True], [False, True]]),
    ]  # round 1
    keep = first_groups(unequal, target=4)
    assert torch.equal(keep[0], unequal[0])
    # three more were needed after round 0: rank 0's two, then rank 1's; the fourth is left over
    assert torch.equal(keep[1], torch.tensor([[True, True], [False, False]]))
    assert int(sum(k.sum() for k in first_groups(unequal, target=9))) == 5  # short: all of them


def trained_prompts(grads: list) -> set[int]:
    """Prompts whose logits rows got a gradient in any step (one block of G_MAX rows per prompt)."""
    blocks = torch.stack(grads).abs().sum(dim=(0, 2, 3)).view(-1, R.G_MAX).sum(dim=1)  # [prompts]
    return set(torch.nonzero(blocks).flatten().tolist())


def test_refill_fills_the_batch_with_groups_with_unequal_rewards():
    settings = dict(refill_rounds=2, entropy_coef=0.1)  # the entropy bonus shows every trained group
    expected = R.reference(settings, batches=R.KEPT[2])
    assert differs(expected, R.reference(settings | dict(filter_zero_variance=True)))  # plain filtering
    run = R.train(settings)
    assert_same(run.grads, expected)
    assert trained_prompts(run.grads) == {1, 3, 9, 11, 4, 6}  # no equal-reward group, not the surplus 12
    assert all(len(set(R.ALL_EXAMPLES[i].meta["rewards"])) > 1 for i in trained_prompts(run.grads))
    assert run.data.refills == [(0, 1), (0, 2), (1, 1), (1, 2)]


def test_the_cap_is_respected_and_a_short_batch_trains_on_what_it_holds():
    settings = dict(refill_rounds=1, loss_type="dapo")
    run = R.train(settings, metrics=True)
    assert run.data.refills == [(0, 1), (1, 1)]  # one round per step, never more
    assert_same(run.grads, R.reference(settings, batches=R.KEPT[1]))
    # the last step: 4 groups drawn, then 4 more, and only 2 with unequal rewards
    assert {k: run.metrics[f"train/dynamic/{k}"] for k in ("rounds", "groups_drawn", "groups_kept", "cap_hit")} == {
        "rounds": 1,
        "groups_drawn": 8,
        "groups_kept": 2,
        "cap_hit": 1,
    }
    assert run.metrics["train/reward"] == pytest.approx(sum(sum(R.REWARDS[i]) for i in range(4, 8)) / 16)


def test_refilling_stops_once_the_batch_is_full():
    run = R.train(dict(refill_rounds=3))
    assert run.data.refills == [(0, 1), (0, 2), (1, 1), (1, 2), (1, 3)]


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_each_loss_type_normalises_the_dynamic_batch_as_one_batch(loss_type):
    settings = dict(
        refill_rounds=2, loss_type=loss_type, scale_rewards="batch", entropy_coef=0.1, beta=0.2, micro_batch_size=3
    )
    assert_same(R.train(settings).grads, R.reference(settings, batches=R.KEPT[2]))


def test_several_iterations_reuse_the_dynamic_batch():
    settings = dict(refill_rounds=2, num_iterations=2, epsilon=0.05, loss_type="dapo")
    assert_same(R.train(settings, steps=4).grads, R.reference(settings, steps=4, batches=R.KEPT[2]))


@pytest.mark.parametrize("loss_type", ["dapo", "bnpo"])
def test_each_batch_of_an_accumulation_window_is_refilled_on_its_own(loss_type):
    """Batches of 2: the first (0, 1) is refilled from batch key 0 (rounds of 2: 8 and 10, then 11
    and 12), the second (2, 3) from key 1, which only has equal rewards: it hits the cap with 3
    alone."""
    settings = dict(refill_rounds=2, loss_type=loss_type, entropy_coef=0.1)
    run = R.train(settings, steps=1, batch_size=2, accumulate=2)
    assert run.data.refills == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert_same(run.grads, R.reference(settings, steps=1, accumulate=2, batches=[[1, 11], [3]]))


def test_a_data_module_without_refill_is_a_clear_error(monkeypatch):
    monkeypatch.delattr(R.FixedRewards, "refill")
    with pytest.raises(RuntimeError, match="refill_rounds > 0 .* needs a data module with refill"):
        R.train(dict(refill_rounds=1))


def test_negative_refill_rounds_are_refused():
    with pytest.raises(ValueError, match="refill_rounds"):
        GRPOStrategy(refill_rounds=-1)


def test_a_hybrid_with_refill_rounds_is_refused():
    from zoo.hybrid import SRFT

    with pytest.raises(ValueError, match="refill_rounds .* cannot be combined with a guidance"):
        GRPOStrategy(refill_rounds=2, guidance=SRFT())
