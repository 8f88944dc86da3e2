"""The hybrids' gradients (`zoo.hybrid`: SRFT, LUFFY, Entropulse) pinned against GRPO written again
from the papers' formulas (`grpo_reference`): a demonstration as the last row of every group, its
shaped unclipped off-policy term, SRFT's entropy-weighted SFT term and positive-sample weights, and
Entropulse's SFT step on a success.
"""

import pytest

from tests.zoo import grpo_reference as R
from tests.zoo.test_grpo_gradients import assert_same, check

LUFFY = ("luffy", {"shaping": 0.1})
SRFT = ("srft", {})
CASES = {  # name: (settings, what the strategy would use if it ignored or inverted the option)
    "luffy": (dict(guidance=LUFFY), dict(guidance=("luffy", {"shaping": 0.0}))),
    "luffy-unshaped": (dict(guidance=("luffy", {"shaping": 0.0})), dict(guidance=LUFFY)),
    "srft": (dict(guidance=SRFT), dict(guidance=LUFFY)),
    "srft-sft_coef": (dict(guidance=SRFT), dict(guidance=("srft", {"sft_coef": 0.0}))),
    "srft-positive_coef": (dict(guidance=SRFT), dict(guidance=("srft", {"positive_coef": None}))),
    "srft-entropy_aware": (dict(guidance=("srft", {"entropy_aware": False})), dict(guidance=SRFT)),
    "srft-filter": (dict(guidance=SRFT, filter_zero_variance=True), dict(filter_zero_variance=False)),
    "srft-mask_truncated": (dict(guidance=SRFT, mask_truncated=True, max_new_tokens=3), dict(mask_truncated=False)),
    "srft-iterations": (dict(guidance=SRFT, num_iterations=2, epsilon=0.05), dict(num_iterations=1)),
    "srft-kl-entropy-micro": (dict(guidance=SRFT, beta=0.2, entropy_coef=0.1, micro_batch_size=3), dict(beta=0.0)),
    "srft-scale-none": (dict(guidance=SRFT, scale_rewards="none"), dict(scale_rewards="group")),
}


@pytest.mark.parametrize("name", CASES)
def test_each_hybrid_option_changes_the_gradient_as_its_formula_says(name):
    settings, ignored = CASES[name]
    check(settings, ignored)


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo", "bnpo", "gspo", "gpg"])
def test_the_expert_row_joins_every_loss_type(loss_type):
    settings = dict(guidance=SRFT, loss_type=loss_type, micro_batch_size=3)
    check(settings, dict(guidance=None))


@pytest.mark.parametrize("loss_type", ["dapo", "bnpo"])
def test_accumulating_two_batches_keeps_one_sft_normaliser(loss_type):
    settings = dict(guidance=SRFT, loss_type=loss_type, filter_zero_variance=True)
    run = R.train(settings, steps=2, batch_size=2, accumulate=2)
    assert_same(run.grads, R.reference(settings, steps=2, batch_size=2, accumulate=2))


def test_entropulse_trains_sft_on_the_success_once_entropy_collapses():
    """Batches of 2 prompts: step 0 is GRPO (prompt 1's sample 0 is the only full-accuracy
    completion); a threshold no entropy reaches makes step 1 an SFT step on that sample (drawn
    twice), at the weights step 0 left."""
    settings = dict(guidance=("entropulse", {"threshold": 100.0, "window": 1, "sft_steps": 1}))
    run = R.train(settings, steps=2, batch_size=2, metrics=True)
    (grpo,) = R.reference({}, steps=1, batch_size=2)
    theta = R.initial_theta()[0] - R.LR * grpo["grad"]
    sft = R.nll_gradient(theta, [(R.EXAMPLES[1], 0)] * 2, R.DEFAULTS)
    assert_same(run.grads, [grpo["grad"], sft])
    assert run.metrics["train/entropulse/sft"] == 1.0 and run.metrics["train/entropulse/phases"] == 1.0
    assert run.metrics["train/entropulse/buffer"] == 1.0


def test_entropulse_stays_in_rl_above_the_threshold():
    settings = dict(guidance=("entropulse", {"threshold": 0.0, "window": 1, "sft_steps": 1}))
    assert_same(R.train(settings, steps=2, batch_size=2).grads, R.reference({}, steps=2, batch_size=2))
