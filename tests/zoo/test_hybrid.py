"""The hybrids' losses by hand (`zoo.hybrid`): LUFFY's shaped off-policy term, SRFT's entropy-aware
weights and its SFT term on a hand-built window part, the demonstration joining its group, and
Entropulse's switching logic on canned entropy traces."""

import math
import random
from types import SimpleNamespace

import pytest
import torch

from tasks import Example
from zoo.hybrid import LUFFY, SRFT
from zoo.hybrid import functional as H
from zoo.hybrid.entropulse import Schedule, Successes
from zoo.hybrid.expert import join_groups
from zoo.rollout.rollout import Rollout


def test_policy_shaping_and_its_gradient():
    logps = torch.tensor([[math.log(0.5)]], requires_grad=True)
    assert float(H.shaped(logps.detach(), 0.1)) == pytest.approx(0.5 / 0.6)
    assert float(H.shaped(logps.detach(), 0.0)) == pytest.approx(0.5)  # unshaped: the ratio with pi_b = 1
    loss = H.expert_surrogate(logps, torch.tensor([2.0]), 0.1)
    assert float(loss.detach()) == pytest.approx(-2 * 0.5 / 0.6)
    loss.sum().backward()
    # d(-A p / (p + g)) / dlogp = -A g p / (p + g)^2: 0.1 * 0.5 / 0.36 * -2
    assert float(logps.grad) == pytest.approx(-2 * 0.1 * 0.5 / 0.36)


def test_srft_weights_at_one_nat():
    entropy = torch.tensor([[1.0, 0.2]], requires_grad=True)
    w_sft = H.entropy_weight(entropy, 0.5, -1.0)
    torch.testing.assert_close(w_sft, torch.tensor([[0.5 * math.exp(-1), 0.5 * math.exp(-0.2)]]))  # 0.184, 0.409
    assert not w_sft.requires_grad  # stop-grad
    weights = H.positive_weights(entropy.repeat(2, 1), torch.tensor([1.0, -1.0]), 0.1)
    torch.testing.assert_close(weights, torch.tensor([[0.1 * math.e, 0.1 * math.exp(0.2)], [1.0, 1.0]]))
    constant = H.positive_weights(entropy, torch.tensor([1.0]), 0.1, entropy_aware=False)
    torch.testing.assert_close(constant, torch.tensor([[0.1, 0.1]]))


def hand_part():
    """Row 0 a sample (advantage 1), row 1 the demonstration (advantage 2; its second token is
    padding)."""
    rollout = SimpleNamespace(expert=torch.tensor([False, True]))
    return SimpleNamespace(
        rollout=rollout,
        advantages=torch.tensor([1.0, 2.0]),
        rows=torch.arange(2),
        mask=torch.tensor([[True, True], [True, False]]),
    )


def test_srft_loss_of_a_hand_built_part():
    strategy = SimpleNamespace(reduce=lambda t, reduce_op: t, root_device="cpu", world_size=1)
    part, guidance = hand_part(), SRFT(sft_coef=0.5, positive_coef=0.1, shaping=0.1)
    logps = torch.log(torch.tensor([[0.5, 0.25], [0.5, 0.9]])).requires_grad_()
    out = {"logps": logps, "entropy": torch.tensor([[1.0, 0.0], [1.0, 2.0]])}
    per_token = -part.advantages[:, None] * torch.ones(2, 2)  # the on-policy surrogate at ratio 1: -A
    guidance.prepare(strategy, [part])  # one demonstration token in the window
    per_token, extra = guidance.adjust(strategy, part, torch.arange(2), out, per_token, None)
    # sample, positive advantage: -A * 0.1 * exp(H); demonstration: -A * p / (p + 0.1), unclipped,
    # no ratio
    expected = torch.tensor([[-0.1 * math.e, -0.1], [-2 * 0.5 / 0.6, -2 * 0.9 / 1.0]])
    torch.testing.assert_close(per_token, expected)
    # SFT: the demonstration's one counted token, w_SFT = 0.5 exp(-1), NLL -log 0.5, over 1 token
    assert float(extra.detach()) == pytest.approx(0.5 * math.exp(-1) * math.log(2))
    extra.backward()
    assert float(logps.grad[1, 0]) == pytest.approx(-0.5 * math.exp(-1)) and float(
        logps.grad.abs().sum()
    ) == pytest.approx(0.5 * math.exp(-1))  # no gradient on the sample's tokens nor on padding


def test_the_demonstration_is_the_last_row_of_its_group():
    sampled = Rollout(
        examples=["a", "b"],
        prompts=None,
        num_generations=2,
        completion_ids=torch.tensor([[1, 0], [2, 2], [3, 0], [4, 4]]),
        completion_mask=torch.tensor([[True, True], [True, True], [True, True], [True, True]]),
        truncated=torch.tensor([False, True, False, True]),
        completions=["1", "22", "3", "44"],
    )
    ids, mask = torch.tensor([[7, 7, 0], [8, 0, 0]]), torch.tensor([[True, True, True], [True, True, False]])
    joined = join_groups(sampled, ids, mask, torch.tensor([True, False]), ["77", "8"], pad=0)
    assert joined.num_generations == 3 and joined.size == 6
    assert joined.completion_ids.tolist() == [[1, 0, 0], [2, 2, 0], [7, 7, 0], [3, 0, 0], [4, 4, 0], [8, 0, 0]]
    assert joined.completion_mask.sum(1).tolist() == [2, 2, 3, 2, 2, 2]  # the added column is no one's token
    assert joined.expert.tolist() == [False, False, True, False, False, True]
    assert joined.truncated.tolist() == [False, True, True, False, True, False]
    assert joined.completions == ["1", "22", "77", "3", "44", "8"] and joined.example(5) == "b"


def test_expert_guidance_refuses_self_rewarded_tasks():
    """A self-rewarded task scores samples by agreement, the demonstration by its answer: refused,
    not mixed."""
    tasks = {"rotation": SimpleNamespace(self_reward=None), "jigsaw": SimpleNamespace(self_reward=object())}
    datamodule = SimpleNamespace(demonstration=lambda example: "A", tasks=tasks)
    strategy = SimpleNamespace(lightning_module=SimpleNamespace(trainer=SimpleNamespace(datamodule=datamodule)))
    with pytest.raises(ValueError, match=r"self-rewarded tasks \['jigsaw'\]"):
        LUFFY().extend(strategy, None, [], None)


def phases(schedule: Schedule, trace: list[float], steps: int, ready=lambda step: True) -> str:
    """Drive ``schedule`` as Entropulse does: each RL step measures the next entropy of
    ``trace``."""
    out, entropy, measured = [], None, iter(trace)
    for step in range(steps):
        phase = schedule.next_phase(entropy, ready(step))
        out.append("S" if phase == "sft" else "R")
        entropy = next(measured) if phase == "rl" else None
    return "".join(out)


def test_sft_starts_when_the_window_mean_falls_below_the_threshold_and_rl_resumes():
    schedule = Schedule(threshold=0.5, window=3, sft_steps=2)
    # RL steps measure 1.0, 0.4, 0.3 (window mean 0.57), then 0.2: the window 0.4, 0.3, 0.2 (mean
    # 0.3) collapses, two SFT steps; RL starts a new window: 0.9, 0.1, 0.1 (mean 0.37) collapses
    # again
    trace = [1.0, 0.4, 0.3, 0.2, 0.9, 0.1, 0.1, 0.6]
    assert phases(schedule, trace, 12) == "RRRRSSRRRSSR"
    assert schedule.phases == 2


def test_a_single_low_step_in_a_high_window_does_not_switch():
    assert phases(Schedule(0.5, 3, 1), [0.9, 0.9, 0.0, 0.9, 0.9, 0.9, 0.9], 7) == "RRRRRRR"


def test_a_collapse_waits_until_there_is_something_to_train_on():
    schedule = Schedule(threshold=0.5, window=1, sft_steps=1)
    assert phases(schedule, [0.1] * 5, 5, ready=lambda step: step >= 3) == "RRRSR"


def example(uid: str) -> Example:
    return Example(messages=[], answer=None, task="t", uid=uid)


def test_successes_keep_distinct_completions_of_the_latest_examples():
    buffer = Successes(size=2)
    a, b, c = example("a"), example("b"), example("c")
    for ex, text in [(a, "x"), (a, "x"), (a, "y"), (b, "z"), (c, "w")]:
        buffer.add(ex, text)
    assert len(buffer) == 2  # "a", the oldest, was dropped
    examples, texts = buffer.draw(50, random.Random(0))
    assert {ex.uid for ex in examples} == {"b", "c"}
    assert all(text == {"b": "z", "c": "w"}[ex.uid] for ex, text in zip(examples, texts, strict=True))
    buffer.add(b, "v")
    assert sorted({t for ex, t in zip(*buffer.draw(50, random.Random(1)), strict=True) if ex.uid == "b"}) == ["v", "z"]
