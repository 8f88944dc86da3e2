"""`PolicyModule.token_scores` with ``score_prefix_once`` (each distinct prompt of a micro-batch run
once into a KV cache that its rows continue) against whole prompt + completion rows, through every
policy family's tiny checkpoint: values and gradients, the full-logits and chunked paths, rows of a
prompt split and out of order, padding trimmed or not, the old-policy and reference passes, LoRA,
bfloat16, and the settings that fall back to whole rows."""

import logging

import pytest
import torch

import zoo.scoring
from tests.zoo.test_logprobs_policies import CASES, assert_same_gradients, load, train_pass
from tests.zoo.test_policy_contract import examples_for
from zoo import QwenVLPolicy


def forward_widths(policy) -> list:
    """A list that grows by the ``input_ids`` shape of each forward of the policy's model."""
    widths = []
    policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    return widths


def both(policy, rollout, chunk):
    """`train_pass` scoring whole rows, then with the prefix once."""
    policy.score_prefix_once = False
    expected = train_pass(policy, rollout, chunk)
    policy.score_prefix_once = True
    return train_pass(policy, rollout, chunk), expected


@pytest.mark.parametrize("chunk", [None, 5], ids=["full-logits", "chunked"])
@pytest.mark.parametrize("cls,ckpt", CASES, ids=[f"{cls.__name__}-{c}" for cls, c in CASES])
def test_prefix_once_gives_the_scores_and_gradients_of_whole_rows(cls, ckpt, chunk):
    """The family's prompts (media, text only, different lengths: left padded), 3 completions
    each, temperature 0.8; the language model runs each prompt once."""
    policy = load(cls, ckpt)
    rollout = policy.sample(examples_for(policy), 3, max_new_tokens=6, seed=1, temperature=0.8)
    widths = forward_widths(policy)
    (got, grads), (expected, expected_grads) = both(policy, rollout, chunk)
    b, n = len(rollout.examples), rollout.size
    whole = widths[0][1]  # trimmed prompt + completion columns
    length = whole - (widths[1][1] - 1)  # the cached prefix's columns, then one prompt token + completion
    assert widths == [(n, whole), (b, widths[1][1]), (n, whole - widths[1][1])] and b < n and length > 1
    for key in ("logps", "entropy"):
        torch.testing.assert_close(got[key], expected[key], atol=2e-6, rtol=0)
    assert torch.equal(got["greedy"], expected["greedy"])
    assert (got["logps"][~rollout.completion_mask] == 0).all()
    assert_same_gradients(grads, expected_grads)


def test_rows_split_and_out_of_order_padding_kept_old_and_reference_passes():
    """Micro-batches that hold part of a group, rows out of order, a group's single row, untrimmed
    padding; the no-gradient old-policy pass and the reference copy's pass."""
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl")
    rollout = policy.sample(examples_for(policy), 3, max_new_tokens=5, seed=2, temperature=1.3)
    widths = forward_widths(policy)
    # rows of prompts [1, 0, 2, 0, 1]: 3 prefixes; [2, 0, 0]: 2; [2, 0]: no prompt twice, whole rows
    for rows, runs in (([4, 0, 7, 1, 5], [3, 5]), ([6, 2, 1], [2, 3]), ([8, 2], [2])):
        for trim in (True, False):
            policy.trim_padding = trim
            passes = {}
            for once in (False, True):
                policy.score_prefix_once = once
                widths.clear()
                with torch.no_grad():
                    old, entropy = policy.token_log_probs(rollout, torch.tensor(rows))
                passes[once] = (old, entropy, policy.reference_log_probs(rollout, torch.tensor(rows)))
            assert [w[0] for w in widths] == runs  # the policy's forwards, prefix once (the reference: a copy)
            for got, expected in zip(passes[True], passes[False], strict=True):
                torch.testing.assert_close(got, expected, atol=2e-6, rtol=0)


def test_lora_adapter_gradients_and_the_adapters_off_reference():
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl", lora={"rank": 2})
    with torch.no_grad():  # move the adapters off zero, so the reference differs from the policy
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    rollout = policy.sample(examples_for(policy), 2, max_new_tokens=5, seed=3, temperature=0.7)
    (got, grads), (expected, expected_grads) = both(policy, rollout, 3)
    torch.testing.assert_close(got["logps"], expected["logps"], atol=2e-6, rtol=0)
    assert grads and all(".lora_" in name for name in grads)
    assert_same_gradients(grads, expected_grads)
    rows = torch.arange(rollout.size)
    reference = {}
    for once in (False, True):
        policy.score_prefix_once = once
        reference[once] = policy.reference_log_probs(rollout, rows)
    torch.testing.assert_close(reference[True], reference[False], atol=2e-6, rtol=0)
    assert (reference[True] - got["logps"]).abs().max() > 1e-3


def test_bfloat16():
    """In bfloat16 the log-probs match (here exactly) and the gradients, summed into the cached
    prefix before the weights, within about one bfloat16 step (2**-7) of the largest (0.96%)."""
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl", dtype="bfloat16")
    rollout = policy.sample(examples_for(policy), 3, max_new_tokens=5, seed=4)
    (got, grads), (expected, expected_grads) = both(policy, rollout, 4)
    torch.testing.assert_close(got["logps"], expected["logps"], atol=0.01, rtol=0)
    scale = max(float(g.abs().max()) for g in expected_grads.values())
    for name, grad in expected_grads.items():
        torch.testing.assert_close(grads[name].float(), grad.float(), atol=0.02 * scale, rtol=0, msg=name)


def test_gradient_checkpointing_scores_whole_rows_and_says_so_once(caplog):
    """Hugging Face's checkpointed layers turn the cache off; passes without gradients share."""
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl", gradient_checkpointing=True)
    rollout = policy.sample(examples_for(policy), 2, max_new_tokens=4, seed=5)
    widths = forward_widths(policy)
    rows = torch.arange(rollout.size)
    zoo.scoring._prefix_refusals.clear()
    with caplog.at_level(logging.WARNING, logger="zoo.scoring"):
        for _ in range(2):
            policy.token_scores(rollout, rows)
    assert [w[0] for w in widths] == [rollout.size] * 2
    assert sum("gradient_checkpointing" in r.getMessage() for r in caplog.records) == 1
    with torch.no_grad():
        policy.token_scores(rollout, rows)
    assert widths[2][0] == len(rollout.examples)  # the prefix, once per prompt


def test_one_row_per_prompt_scores_whole_rows():
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl")
    rollout = policy.sample(examples_for(policy), 1, max_new_tokens=3, seed=6)
    widths = forward_widths(policy)
    with torch.no_grad():
        policy.token_scores(rollout, torch.arange(rollout.size))
    assert len(widths) == 1
