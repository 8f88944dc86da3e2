"""`PolicyModule.token_scores` with ``score_chunk_tokens`` (the output head applied to the final
hidden states a chunk at a time) against the full-logits path, through every policy family's tiny
checkpoint: the training pass's values and gradients, the old-policy and reference passes, LoRA."""

import pytest
import torch

from tests.zoo.test_policy_contract import CASES, examples_for
from zoo import QwenVLPolicy


def load(cls, ckpt: str, **kwargs):
    torch.manual_seed(0)
    policy = cls(pretrained=ckpt, **kwargs)
    policy.configure_model()
    return policy


def head_calls(policy) -> list:
    """A list that grows by one each time the model's output head runs."""
    calls = []
    policy.model.get_output_embeddings().register_forward_hook(lambda *args: calls.append(1))
    return calls


def train_pass(policy, rollout, chunk: int | None) -> tuple[dict, dict]:
    """Scores of every row, and the gradients of a GRPO-like loss (weighted log-probs and an
    entropy bonus over the completion tokens) on every trainable parameter."""
    policy.score_chunk_tokens = chunk
    policy.model.zero_grad(set_to_none=True)
    rows = torch.arange(rollout.size)
    scores = policy.token_scores(rollout, rows)
    weights = torch.linspace(-1.0, 1.0, rollout.size)[:, None] * rollout.completion_mask  # [N, L]
    (-(scores["logps"] * weights).sum() - 0.1 * (scores["entropy"] * rollout.completion_mask).sum()).backward()
    grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in scores.items()}, grads


def assert_same_gradients(got: dict, expected: dict) -> None:
    """Every gradient within 1e-6 of the largest one (float32; some are rounding noise, e.g. on
    attention key biases, whose true gradient is 0)."""
    assert got.keys() == expected.keys() and expected
    scale = max(float(g.abs().max()) for g in expected.values())
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, atol=2e-6 * scale, rtol=0, msg=name)


@pytest.mark.parametrize("cls,ckpt", CASES, ids=[f"{cls.__name__}-{c}" for cls, c in CASES])
def test_chunked_scores_and_gradients_equal_the_full_logits_path(cls, ckpt):
    """Temperature 0.8, rows of different lengths, a chunk (5) that divides no row count; whole
    rows, so the full-logits path runs the head once (prefix once: `test_logprobs_prefix`)."""
    policy = load(cls, ckpt, score_prefix_once=False)
    rollout = policy.sample(examples_for(policy), 2, max_new_tokens=6, seed=1, temperature=0.8)
    calls = head_calls(policy)
    expected, expected_grads = train_pass(policy, rollout, None)
    assert len(calls) == 1
    got, grads = train_pass(policy, rollout, 5)
    assert len(calls) == 1  # the chunked pass never ran the head module: it read the hidden states
    mask = rollout.completion_mask
    for key in ("logps", "entropy"):
        torch.testing.assert_close(got[key], expected[key], atol=1e-6, rtol=0)
    assert torch.equal(got["greedy"], expected["greedy"])
    assert (got["logps"][~mask] == 0).all()
    assert_same_gradients(grads, expected_grads)
    assert policy.model.get_output_embeddings().weight.grad.abs().max() > 0


def test_tied_head_reference_and_old_policy_passes_use_the_same_scores():
    """Qwen2.5-VL with its head tied to the input embeddings (as the 3B is), the reference model
    (a second copy) and the old-policy pass (no gradient, as `zoo.grpo` takes it)."""
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl")
    policy.model.lm_head.weight = policy.model.get_input_embeddings().weight
    rollout = policy.sample(examples_for(policy), 3, max_new_tokens=5, seed=2, temperature=1.3)
    expected, expected_grads = train_pass(policy, rollout, None)
    got, grads = train_pass(policy, rollout, 4)
    torch.testing.assert_close(got["logps"], expected["logps"], atol=1e-6, rtol=0)
    assert_same_gradients(grads, expected_grads)
    rows = torch.tensor([4, 0, 7])
    passes = {}
    for chunk in (None, 3):
        policy.score_chunk_tokens = chunk
        with torch.no_grad():
            old, entropy = policy.token_log_probs(rollout, rows)
        passes[chunk] = (old, entropy, policy.reference_log_probs(rollout, rows))
    for got, expected in zip(passes[3], passes[None], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_lora_adapter_gradients_and_the_adapters_off_reference():
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl", lora={"rank": 2})
    with torch.no_grad():  # move the adapters off zero, so the reference differs from the policy
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    rollout = policy.sample(examples_for(policy), 2, max_new_tokens=5, seed=3, temperature=0.7)
    expected, expected_grads = train_pass(policy, rollout, None)
    got, grads = train_pass(policy, rollout, 2)
    torch.testing.assert_close(got["logps"], expected["logps"], atol=1e-6, rtol=0)
    assert grads and all(".lora_" in name for name in grads)
    assert_same_gradients(grads, expected_grads)
    rows = torch.arange(rollout.size)
    reference = {}
    for chunk in (None, 2):
        policy.score_chunk_tokens = chunk
        reference[chunk] = policy.reference_log_probs(rollout, rows)
    torch.testing.assert_close(reference[2], reference[None], atol=1e-6, rtol=0)
    assert (reference[2] - got["logps"]).abs().max() > 1e-3


def test_a_model_that_rescales_its_logits_takes_the_full_logits_path():
    """A final soft-capping (Gemma 2) would be skipped by reading hidden states: not chunked."""
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl")
    policy.model.config.get_text_config().final_logit_softcapping = 30.0
    rollout = policy.sample(examples_for(policy), 1, max_new_tokens=3, seed=4)
    calls = head_calls(policy)
    with torch.no_grad():
        policy.token_log_probs(rollout, torch.arange(rollout.size))
    assert len(calls) == 1


def test_score_chunk_tokens_under_one_is_a_clear_error():
    with pytest.raises(ValueError, match="score_chunk_tokens"):
        QwenVLPolicy(pretrained="tiny:qwen2_5_vl", score_chunk_tokens=0)
