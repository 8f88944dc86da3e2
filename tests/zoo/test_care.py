"""GRPO-CARE's consistency bonus (`zoo.grpo.CARE`): the bonus and the EMA update by hand, and a few
steps of ``configs/consistency_care.yaml`` through ``zoo fit``."""

import pytest
import torch
from torch.testing import assert_close

from zoo import GRPOStrategy
from zoo.grpo import CARE
from zoo.grpo.care import consistency_bonus, ema_update


def test_bonus_by_hand():
    likelihood = torch.tensor([[0.2, 0.4, 0.6, 0.1], [0.3, 0.3, 0.3, 0.3]])
    right = torch.tensor([[True, True, False, True], [False, False, False, False]])
    # group 0: mean p of the right ones (0.2 + 0.4 + 0.1) / 3 = 0.7 / 3; the wrong 0.6 earns nothing
    mean = 0.7 / 3
    expected = torch.tensor([[0.5 * 0.2 / mean, 0.5, 0.0, 0.5 * 0.1 / mean], [0.0, 0.0, 0.0, 0.0]])
    assert_close(consistency_bonus(likelihood, right, 0.5), expected)


def test_ema_update_by_hand():
    slow, fast = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    with torch.no_grad():
        slow.weight.fill_(1.0), slow.bias.fill_(0.0), fast.weight.fill_(3.0), fast.bias.fill_(-1.0)
    ema_update(slow, fast, decay=0.9)
    assert_close(slow.weight, torch.full((1, 2), 0.9 * 1.0 + 0.1 * 3.0))
    assert_close(slow.bias, torch.full((1,), -0.1))


def test_care_replaces_the_kl_term():
    with pytest.raises(ValueError, match="beta 0"):
        GRPOStrategy(beta=0.04, guidance=CARE())
    with pytest.raises(ValueError, match="decay"):
        CARE(decay=1.0)


def test_configs_consistency_care_trains_through_zoo_fit(tmp_path, monkeypatch):
    from tests.test_self_reward_configs import fit

    monkeypatch.chdir(tmp_path)
    trainer = fit("consistency_care.yaml", "--trainer.strategy.init_args.guidance.init_args.coef", "0.3")
    metrics = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(metrics["train/grpo/loss"])
    assert 0.0 <= float(metrics["train/care/bonus"]) <= 0.3
    guidance = trainer.strategy.guidance
    assert isinstance(guidance, CARE) and guidance._ema is not None
    assert not any(p.requires_grad for p in guidance._ema.parameters())


class StubPolicy(torch.nn.Module):
    """Log-probs per row from a fixed table (what the EMA copy would give), and a model to copy."""

    lora = None

    def __init__(self, logps: torch.Tensor):
        super().__init__()
        self.model = torch.nn.Linear(1, 1)
        self.logps = logps

    def token_log_probs(self, rollout, rows, model=None, entropy=True):
        assert model is not None and model is not self.model  # scored by the EMA copy
        return self.logps[rows], torch.zeros_like(self.logps[rows])


class StubStrategy:
    def __init__(self, policy):
        self.lightning_module = policy

    def plan(self, rows):
        return [[(r, 1.0) for r in torch.split(rows[0], 3)]]


def test_the_bonus_is_added_to_the_rewards_advantages_are_computed_from():
    from types import SimpleNamespace

    from tasks import Reward
    from zoo.metrics import MetricMeans

    # 1 prompt, G = 4; completion tokens: row 0 two tokens of log-prob log 0.5 -> p = 0.5; row 1 one
    # token log 0.25 -> p = 0.25; row 2 (wrong) log 0.9; row 3 log 1.0 (p = 1)
    logps = torch.log(torch.tensor([[0.5, 0.5], [0.25, 1.0], [0.9, 0.9], [1.0, 1.0]]))
    mask = torch.tensor([[True, True], [True, False], [True, True], [True, True]])
    rollout = SimpleNamespace(examples=[None], num_generations=4, size=4, completion_mask=mask)
    rewards = [Reward(1.0 + right, {"accuracy": float(right)}) for right in (1, 1, 0, 1)]
    care = CARE(coef=0.6)
    _, paid = care.extend(StubStrategy(StubPolicy(logps)), rollout, rewards, MetricMeans())
    # right p: 0.5, 0.25, 1.0 -> mean 1.75 / 3; bonus 0.6 * min(1, p / mean)
    mean = 1.75 / 3
    expected = [2.0 + 0.6 * 0.5 / mean, 2.0 + 0.6 * 0.25 / mean, 1.0, 2.0 + 0.6]
    assert [r.total for r in paid] == pytest.approx(expected)
    assert paid[2].parts["care_bonus"] == 0.0 and rewards[0].total == 2.0  # the originals are left as they were
