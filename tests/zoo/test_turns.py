"""Multi-turn rollouts (`zoo.rollout.turns`): a scripted engine writes tool calls and answers; the
rollout lays the turns end to end, the loss sees only the policy's tokens, and the log-probs and
gradients of a 2-turn rollout equal those computed by hand from the same conversation."""

from __future__ import annotations

import random

import pytest
import torch

from tasks import Example, Rotation
from tasks.tools.base import TURN_BREAK, replay
from tests.helpers import make_item
from tests.zoo.tool_script import BOX, SCRIPT, LookRotation, Scripted
from zoo import QwenVLPolicy
from zoo.data import verify
from zoo.grpo import functional as F
from zoo.rollout.rollout import Rollout
from zoo.rollout.turns import MultiTurnRollout, sample_turns
from zoo.sft.demonstrations import teacher_forced

G = 4


@pytest.fixture(scope="module")
def policy():
    module = QwenVLPolicy("tiny:qwen2_5_vl")
    module.configure_model()
    return module


@pytest.fixture
def scripted(policy):
    engine, policy.engine = policy.engine, Scripted()
    policy.engine.bind(policy)
    yield policy
    policy.engine = engine


def example() -> Example:
    ex = Rotation(answer_format="bare").make_example(make_item("image", 0), random.Random(0))
    ex.uid = "u0"
    return ex


def tokens(policy, text: str) -> list[int]:
    return policy.tokenizer(text, add_special_tokens=False)["input_ids"] + [policy.eos_ids[0]]


def test_rows_take_their_own_turns_and_the_completion_holds_only_the_policys_tokens(scripted):
    policy = scripted
    rollout = sample_turns(policy, [example()], G, [BOX], max_new_tokens=32, seed=0)
    assert isinstance(rollout, MultiTurnRollout)
    assert rollout.completions == [
        "<look>1</look>" + TURN_BREAK + "A",
        "B",
        "<look>x</look>",
        "<look>2</look>" + TURN_BREAK + "<look>1</look>",
    ]
    assert rollout.calls.tolist() == [1, 0, 0, 2] and rollout.invalid.tolist() == [False, False, True, False]
    assert [t.rows.tolist() for t in rollout.turns] == [[0, 1, 2, 3], [0, 3]]
    for n, turns in enumerate(
        [["<look>1</look>", "A"], ["B"], ["<look>x</look>"], ["<look>2</look>", "<look>1</look>"]]
    ):
        written = [i for text in turns for i in tokens(policy, text)]
        assert rollout.completion_ids[n, : len(written)].tolist() == written
        assert rollout.completion_mask[n].sum() == len(written)  # no template or tool token counted
        assert not rollout.completion_mask[n, len(written) :].any()
    assert not rollout.truncated.any()
    # the second turn's prompt is the conversation with the tool's image: 2 images for row 0
    second = rollout.turns[1].rollout
    assert second.prompts.items["image"] == [2, 2]
    assert second.num_generations == 1


def test_a_refused_or_crashing_tool_ends_the_row_as_an_invalid_action(scripted, monkeypatch):
    monkeypatch.setitem(SCRIPT, 0, ["<look>9</look>", "<look>8</look>", "<look>1</look> and more", "<look></look>"])
    rollout = sample_turns(scripted, [example()], G, [BOX], max_new_tokens=32, seed=0)
    assert rollout.invalid.tolist() == [True, True, True, True]
    assert len(rollout.turns) == 1  # nobody went on


def test_the_token_budget_bounds_the_row_over_all_its_turns(scripted):
    policy = scripted
    first = len(tokens(policy, "<look>1</look>"))
    rollout = sample_turns(policy, [example()], G, [BOX], max_new_tokens=first + 1, seed=0)
    assert rollout.completion_mask[0].sum() == first + 1  # the answer "A" and its EOS do not both fit
    assert rollout.truncated.tolist() == [True, False, False, True]
    assert rollout.completions[0] == "<look>1</look>" + TURN_BREAK + "A"


def test_a_row_without_tools_answers_in_one_turn(scripted):
    rollout = sample_turns(scripted, [example()], G, [None], max_new_tokens=32, seed=0)
    assert rollout.completions == SCRIPT[0] and len(rollout.turns) == 1 and not rollout.calls.any()


def hand_log_probs(policy, messages: list[dict], written: list[int]) -> torch.Tensor:
    """Log-probs of ``written`` after the conversation ``messages``, from one forward pass built
    here (the policy's encoding of the conversation, then the tokens)."""
    prompt = policy.encode([Example(messages, None, "rotation")]).tensors
    ids = torch.tensor([written])
    inputs = dict(prompt)
    tails = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    for key, value in prompt.items():
        if value.shape == prompt["input_ids"].shape:  # ids, mask, mm_token_type_ids (0: text)
            inputs[key] = torch.cat([value, tails.get(key, torch.zeros_like(ids))], 1)
    logits = policy.model(**inputs).logits[0, prompt["input_ids"].shape[1] - 1 : -1].float()
    logits[:, policy.banned_ids] = float("-inf")
    return logits.log_softmax(-1).gather(-1, ids[0, :, None]).squeeze(-1)


def test_log_probs_and_gradients_of_a_two_turn_rollout_equal_the_hand_computed_ones(scripted):
    policy = scripted
    ex = example()
    rollout = sample_turns(policy, [ex], G, [BOX], max_new_tokens=32, seed=0)
    rows = torch.tensor([0, 1, 3])
    advantages = torch.tensor([1.0, -0.5, 2.0])
    policy.model.zero_grad()
    logps = policy.token_scores(rollout, rows)["logps"]  # [3, L]
    mask = rollout.completion_mask[rows]
    per_token, _ = F.per_token_loss(logps, logps.detach(), advantages, mask, "grpo")
    F.aggregate(per_token, mask, "grpo", 1.0).backward()
    ours = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}

    policy.model.zero_grad()
    loss = 0.0
    for a, turns in zip(
        advantages, [["<look>1</look>", "A"], ["B"], ["<look>2</look>", "<look>1</look>"]], strict=True
    ):
        row = []
        for t, text in enumerate(turns):
            messages = replay(ex.messages, turns[:t], BOX.tools, ex)
            row.append(hand_log_probs(policy, messages, tokens(policy, text)))
        row = torch.cat(row)
        loss = loss - a * row.exp().div(row.exp().detach()).mean()  # GRPO on-policy: ratio 1, mean per row
    loss.backward()
    hand = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
    assert ours.keys() == hand.keys()
    for name in ours:
        assert torch.allclose(ours[name], hand[name], rtol=1e-4, atol=1e-7), name


def test_scored_values_match_each_turns_single_turn_scores(scripted):
    policy = scripted
    rollout = sample_turns(policy, [example()], G, [BOX], max_new_tokens=32, seed=0)
    with torch.no_grad():
        ours = policy.token_scores(rollout, torch.arange(G))["logps"]
        first: Rollout = rollout.turns[0].rollout
        second: Rollout = rollout.turns[1].rollout
        one = policy.token_scores(first, torch.arange(G))["logps"]
        two = policy.token_scores(second, torch.arange(2))["logps"]
    n0 = int(first.completion_mask[0].sum())
    assert torch.equal(ours[0, :n0], one[0, :n0])
    assert torch.equal(ours[0, n0 : n0 + 2], two[0, :2])
    assert torch.equal(ours[1, :2], one[1, :2]) and not ours[1, 2:].any()


def test_a_multi_turn_demonstration_is_teacher_forced_turn_by_turn(policy):
    ex = example()
    demo = "<look>2</look>" + TURN_BREAK + "A"
    rollout, dropped = teacher_forced(policy, [ex, ex], [demo, "B"], toolboxes=[BOX, None])
    assert not dropped.any() and [t.rows.tolist() for t in rollout.turns] == [[0, 1], [0]]
    with torch.no_grad():
        ours = policy.token_scores(rollout, torch.arange(2))["logps"]
        first = hand_log_probs(policy, ex.messages, tokens(policy, "<look>2</look>"))
        second = hand_log_probs(policy, replay(ex.messages, ["<look>2</look>"], BOX.tools, ex), tokens(policy, "A"))
    assert torch.allclose(ours[0, : len(first) + len(second)], torch.cat([first, second]), atol=1e-5)
    assert rollout.completion_mask.sum(1).tolist() == [len(first) + len(second), len(tokens(policy, "B"))]


def test_grpo_trains_a_tool_task_and_its_rollouts_take_several_turns(scripted, monkeypatch):
    from datamodules import PretextDataModule, SyntheticScenes
    from tests.helpers import grpo_fit

    seen = []
    monkeypatch.setattr("zoo.grpo.dynamic.verify", lambda dm, rollout: seen.append(rollout) or verify(dm, rollout))
    data = PretextDataModule(
        SyntheticScenes(image_size=28), [LookRotation(answer_format="bare")], batch_size=2, val_size=2
    )
    before = {n: p.detach().clone() for n, p in scripted.model.named_parameters()}
    grpo_fit(scripted, data, steps=1, num_generations=G, max_new_tokens=48)
    assert isinstance(seen[0], MultiTurnRollout) and seen[0].calls.tolist() == [1, 0, 0, 2] * 2
    assert any(not torch.equal(p, before[n]) for n, p in scripted.model.named_parameters())


def test_a_token_budget_counts_every_turns_prompt(scripted):
    from zoo.training import row_lengths

    rollout = sample_turns(scripted, [example()], G, [BOX], max_new_tokens=32, seed=0)
    first = int(rollout.prompts.tensors["attention_mask"].sum())
    second = rollout.turns[1].rollout.prompts.tensors["attention_mask"].sum(1).tolist()  # rows 0 and 3
    lengths = row_lengths(rollout, torch.arange(G))
    assert lengths[:, 0].tolist() == [first + second[0], first, first, first + second[1]]
    assert lengths[:, 1].tolist() == rollout.completion_mask.sum(1).tolist()
