"""CHORD (`zoo.hybrid.CHORD`): the mu schedule by hand, and one optimizer step's gradient against
``(1 - mu) * GRPO + mu * SFT`` written again on the reference's table policy: the demonstrations
change no group advantage."""

import math
from types import SimpleNamespace

import pytest
import torch

from tests.zoo import grpo_reference as R
from zoo import GRPOStrategy
from zoo.hybrid import CHORD
from zoo.hybrid.chord import chord_mu, phi_weights
from zoo.rollout import Rollout

DEMO_BLOCK = 0  # the table-policy logits block the demonstrations are scored on


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.0),  # warm-up: step / 2 * 0.5
        (1, 0.25),
        (2, 0.5),  # the peak
        (3, 0.4 * 0.5 * (1 + math.cos(math.pi / 4)) + 0.1),  # cosine over 4 steps, a quarter in
        (4, 0.3),  # half way: (0.5 + 0.1) / 2
        (6, 0.1),  # the valley, and after
        (50, 0.1),
    ],
)
def test_mu_schedule_by_hand(step, expected):
    assert chord_mu(step, peak=0.5, valley=0.1, warmup_steps=2, decay_steps=4) == pytest.approx(expected)


def test_phi_is_p_times_one_minus_p_without_gradient():
    logps = torch.log(torch.tensor([[0.5, 0.9, 1.0]])).requires_grad_()
    weights = phi_weights(logps)
    torch.testing.assert_close(weights, torch.tensor([[0.25, 0.09, 0.0]]))
    assert not weights.requires_grad


def test_bad_settings_fail_at_construction():
    with pytest.raises(ValueError, match="mu_peak"):
        CHORD(mu_peak=1.5)
    with pytest.raises(ValueError, match="num_iterations"):
        GRPOStrategy(guidance=CHORD(), num_iterations=2)


def demonstrations(policy, examples, replies, max_tokens=None):
    """`zoo.sft.teacher_forced` for the table policy: each prompt's `grpo_reference.EXPERT`
    tokens, scored on logits block `DEMO_BLOCK`."""
    rows = [R.demonstrated(R.EXPERT[ex.meta["index"]], max_tokens) for ex in examples]
    ids, mask = R.padded([row for row, _ in rows])
    prompts = SimpleNamespace(tensors={"attention_mask": torch.ones(len(examples), 2)})
    rollout = Rollout(list(examples), prompts, 1, ids, mask, torch.tensor([cut for _, cut in rows]), list(replies))
    rollout.blocks = [DEMO_BLOCK] * len(examples)
    return rollout, torch.zeros(len(rows), dtype=torch.bool)


def sft_gradient(s: dict, token_weights: bool) -> torch.Tensor:
    """Gradient at the initial table of the token-mean SFT loss over the first batch's
    demonstrations."""
    theta = R.initial_theta()[0].clone().requires_grad_()
    total, count = 0.0, 0
    for ex in R.EXAMPLES[:4]:
        ids, _ = R.demonstrated(R.EXPERT[ex.meta["index"]], s["max_new_tokens"])
        logp = torch.log_softmax(theta[ex.meta["index"] * R.G_MAX + DEMO_BLOCK, : len(ids)], dim=-1)  # [l, V]
        token = logp.gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)  # [l]
        weight = token.detach().exp() * (1 - token.detach().exp()) if token_weights else 1.0
        total = total + (-token * weight).sum()
        count += len(ids)
    (total / count).backward()
    return theta.grad


def chord_step(monkeypatch, settings: dict, guidance: CHORD):
    monkeypatch.setitem(R.GUIDANCE, "chord", lambda: guidance)
    monkeypatch.setattr("zoo.hybrid.chord.teacher_forced", demonstrations)
    return R.train(settings | {"guidance": ("chord", {})}, steps=1)


@pytest.mark.parametrize("token_weights", [True, False])
def test_one_step_is_one_minus_mu_grpo_plus_mu_sft(monkeypatch, token_weights):
    settings = dict(micro_batch_size=3)
    run = chord_step(monkeypatch, settings, CHORD(mu_peak=0.3, token_weights=token_weights))
    grpo = R.reference(settings, steps=1)[0]["grad"]  # the sampled groups alone: no expert row
    s = R.DEFAULTS | settings
    expected = 0.7 * grpo + 0.3 * sft_gradient(s, token_weights)
    assert float((sft_gradient(s, token_weights)).norm()) > 1e-3  # the SFT term is seen
    torch.testing.assert_close(run.grads[0], expected, atol=1e-8, rtol=1e-5)
    assert run.policy.chunks[:2] == [3, 1]  # the 4 demonstrations first, in micro-batches of 3
    assert run.policy.sampled[0]["num_generations"] == 4  # every row of a group is sampled


def test_mu_zero_in_the_warm_up_leaves_grpo_as_it_is(monkeypatch):
    run = chord_step(monkeypatch, {}, CHORD(mu_peak=0.9, warmup_steps=5))
    torch.testing.assert_close(run.grads[0], R.reference({}, steps=1)[0]["grad"], atol=1e-8, rtol=1e-5)


def test_configs_hybrid_chord_trains_through_zoo_fit(tmp_path, monkeypatch):
    from tests.test_hybrid_cli import fit

    small = ["--data.init_args.batch_size", "2", "--trainer.strategy.init_args.num_generations", "2"]
    rows = fit("chord", tmp_path, monkeypatch, "--trainer.max_steps", "2", *small)
    assert len(rows) == 2
    # the cosine over the run's 2 steps: 0.5 at step 0, (0.5 - 0.02) * 0.5 * (1 + cos(pi / 2)) +
    # 0.02 = 0.26 at step 1
    assert [row["train/hybrid/mu"] for row in rows] == pytest.approx([0.5, 0.26])
    assert all(row["train/hybrid/sft_loss"] > 1.0 for row in rows)  # a random policy: high NLL
    assert all("train/hybrid/expert_reward" not in row for row in rows)  # no demonstration joins a group
