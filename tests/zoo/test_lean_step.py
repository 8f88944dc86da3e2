"""`zoo.rollout.lean_step.LeanStep` against the model's own forward: the same logits bit for bit,
step after step, for every policy family it takes; the others keep the model's forward."""

import pytest
import torch
from torch import nn

from tests.zoo.test_policy_contract import CASES, examples_for, tiny_policy
from zoo.lora import adapters_disabled
from zoo.rollout.decode import start
from zoo.rollout.lean_step import LeanStep

#: The tiny checkpoints whose decoder stack `LeanStep` runs (the rest: Gemma 3's scaled embeddings
#: and sliding layers, Qwen3-VL's query / key norms, the Qwen2.5-Omni thinker's own classes).
LEAN = {"tiny:qwen2_vl", "tiny:qwen2_5_vl", "tiny:idefics3", "tiny:llava_onevision", "tiny:qwen2_audio", "tiny:qwen2"}
STEPS = 5


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0].__name__}-{c[1]}")
def policy(request):
    return tiny_policy(request.param).eval()


def prefilled(policy, examples, repeats: int = 2):
    """``(lm, kwargs, cache)`` after the prefill of ``examples``, as `zoo.rollout.decode` starts."""
    batch = policy.encode(examples)
    lm, cache, kwargs = start(
        policy.model, dict(batch.tensors), batch.media_keys, repeats, policy.generation_config(STEPS), STEPS
    )
    return lm, kwargs, cache


@torch.no_grad()
def both_steps(policy, examples) -> tuple[LeanStep | None, list, list]:
    """Logits ``[N, V]`` of `STEPS` decoding forwards from the same prefill, through the model's
    forward (as `decode` runs it without `LeanStep`) and through `LeanStep`, fed the same tokens
    (the forward's argmax)."""
    lm, kwargs, _ = prefilled(policy, examples)
    lean_lm, lean_kwargs, lean_cache = prefilled(policy, examples)
    step = LeanStep.of(lean_lm, lean_kwargs, lean_cache, lean_kwargs["input_ids"].shape[1] + STEPS)
    tokens = kwargs.pop("input_ids")[:, -1:]
    forward, lean = [], []
    for position in range(STEPS):
        inputs = lm.prepare_inputs_for_generation(
            tokens, next_sequence_length=1, is_first_iteration=position == 0, **kwargs
        )
        outputs = lm(**inputs, return_dict=True)
        kwargs = lm._update_model_kwargs_for_generation(outputs, kwargs)
        forward.append(outputs.logits[:, -1])
        if step is not None:
            lean.append(step(tokens))
        tokens = forward[-1].argmax(-1, keepdim=True)
    return step, forward, lean


def test_lean_step_gives_the_forwards_logits_bit_for_bit(policy):
    examples = examples_for(policy)  # prompts of different lengths: left padded, the mask is used
    step, forward, lean = both_steps(policy, examples)
    assert (step is not None) == (policy.pretrained in LEAN)
    if step is None:
        return
    for position, (a, b) in enumerate(zip(forward, lean, strict=True)):
        assert torch.equal(a, b), f"step {position}: largest difference {(a - b).abs().max()}"


def test_unpadded_prompts_use_no_mask(policy):
    """One prompt repeated: no padding, so the step attends without a mask, as the forward does."""
    if policy.pretrained not in LEAN:
        pytest.skip("the model's forward runs")
    example = examples_for(policy)[:1]
    step, forward, lean = both_steps(policy, example)
    assert not step.padded
    assert all(torch.equal(a, b) for a, b in zip(forward, lean, strict=True))


def test_lora_and_hooks():
    """LoRA-wrapped projections run as modules (adapters that change the logits, the same logits
    both ways); a forward hook on the decoder stack (FSDP2, offloading) leaves the model's forward
    to run."""
    from zoo import QwenVLPolicy

    torch.manual_seed(0)
    policy = QwenVLPolicy(pretrained="tiny:qwen2_5_vl", lora={"rank": 2, "target_modules": ["q_proj", "down_proj"]})
    policy.configure_model()
    policy.eval()
    for name, param in policy.model.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.5)  # B starts at zero: make the adapters count
    text = policy.model.model.language_model
    assert type(text.layers[0].self_attn.q_proj) is not nn.Linear
    step, forward, lean = both_steps(policy, examples_for(policy))
    assert step is not None
    assert all(torch.equal(a, b) for a, b in zip(forward, lean, strict=True))
    with adapters_disabled(policy.model):
        plain = both_steps(policy, examples_for(policy))[1]
    assert not torch.equal(plain[0], forward[0])  # the adapters changed the logits
    handle = text.layers[0].register_forward_pre_hook(lambda module, args: None)
    try:
        assert both_steps(policy, examples_for(policy))[0] is None
    finally:
        handle.remove()


@torch.no_grad()
def test_the_rotary_tables_equal_one_call_per_step(policy):
    """The cos / sin tables `LeanStep` computes for every step at once equal the rotary
    embedding's one call per step bit for bit, over a length whose vectorised loops leave tails."""
    if policy.pretrained not in LEAN:
        pytest.skip("the model's forward runs")
    lm, kwargs, cache = prefilled(policy, examples_for(policy))
    steps = 37
    step = LeanStep.of(lm, kwargs, cache, kwargs["input_ids"].shape[1] + steps)
    like = torch.empty(0, dtype=step.text.embed_tokens.weight.dtype)
    for t in range(steps):
        position = kwargs["position_ids"][..., -1:] + t
        cos, sin = step.text.rotary_emb(like, step._rope_positions(position)[0])
        assert torch.equal(cos, step.cos[:, t : t + 1]) and torch.equal(sin, step.sin[:, t : t + 1]), t
