"""Scoring passes stay exact while doing less work: media encoded once per prompt, padding trimmed
per micro-batch, no old-log-prob pass with one iteration, no second model for the LoRA reference."""

import dataclasses
from functools import partial

import pytest
import torch
from lightning.pytorch import Callback, Trainer

import zoo
from datamodules import PretextDataModule, SyntheticScenes
from tasks import Example, Rotation
from tests.helpers import discover
from tests.zoo.test_policy_contract import examples_for, image_examples, video_examples
from zoo import GRPOStrategy, PolicyModule, QwenVLPolicy
from zoo.rollout.rollout import completion_mask

SHARING = [
    (cls, ckpt)
    for cls in discover(zoo, PolicyModule)
    for ckpt in cls.tiny_checkpoints
    if cls.shared_media or cls.media_once is not PolicyModule.media_once
]


def load(cls, ckpt: str, **kwargs) -> PolicyModule:
    torch.manual_seed(0)
    policy = cls(pretrained=ckpt, **kwargs)
    policy.configure_model()
    return policy


def encoder_input_rows(module, args: tuple, kwargs: dict) -> int:
    """Rows of the first tensor a media encoder was called with (patches, points or images)."""
    return next(v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)).shape[0]


def score(policy, rollout, rows) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Log-probs ``[n, L]``, the gradient of their masked sum on the first trainable encoder weight,
    and the input rows (patches, points, images) each encoder call took."""
    visual = policy.model.model.visual if hasattr(policy.model, "model") else policy.model.encoder
    patches = []
    handle = visual.register_forward_pre_hook(
        lambda module, args, kwargs: patches.append(encoder_input_rows(module, args, kwargs)), with_kwargs=True
    )
    policy.model.zero_grad()
    try:
        logps, _ = policy.token_log_probs(rollout, rows)
    finally:
        handle.remove()
    (logps * rollout.completion_mask[rows]).sum().backward()
    weight = next(p for p in visual.parameters() if p.requires_grad)
    return logps.detach(), weight.grad.clone(), patches


@pytest.mark.parametrize("cls,ckpt", SHARING, ids=[f"{cls.__name__}-{c}" for cls, c in SHARING])
def test_media_features_encoded_once_per_prompt_give_the_same_log_probs_and_gradients(cls, ckpt):
    """Single-image, two-image, text-only, video and image+video prompts (or the family's own
    media), 3 completions each, whole rows (`score_prefix_once` runs the prompts once anyway)."""
    policy = load(cls, ckpt, score_prefix_once=False)
    examples = image_examples() + video_examples() if "video" in policy.content_kinds else examples_for(policy)
    rollout = policy.sample(examples, 3, max_new_tokens=5, seed=1)
    rows, mask = torch.arange(rollout.size), rollout.completion_mask
    shared, shared_grad, shared_patches = score(policy, rollout, rows)
    policy.reuse_media_features = False
    copied, copied_grad, copied_patches = score(policy, rollout, rows)
    # every prompt's media went through the tower once instead of once per completion
    assert copied_patches == [3 * n for n in shared_patches] and sum(shared_patches) > 0
    torch.testing.assert_close(shared[mask], copied[mask], atol=1e-5, rtol=0)
    assert copied_grad.abs().max() > 0
    torch.testing.assert_close(shared_grad, copied_grad, atol=1e-5, rtol=1e-4)


def test_micro_batches_of_prompts_and_their_completions_share_correctly():
    """Chunks that cut groups apart, and rows out of order: each row still gets its own prompt's
    media."""
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl")
    rollout = policy.sample(image_examples() + video_examples(), 2, max_new_tokens=4, seed=2)
    with torch.no_grad():
        policy.reuse_media_features = False
        whole = policy.token_log_probs(rollout, torch.arange(rollout.size))[0]
        policy.reuse_media_features = True
        for chunk in (torch.tensor([1, 2, 3]), torch.tensor([9, 0, 4, 8, 5])):
            mask = rollout.completion_mask[chunk]
            torch.testing.assert_close(
                policy.token_log_probs(rollout, chunk)[0][mask], whole[chunk][mask], atol=1e-5, rtol=0
            )


def uneven_rollout(policy):
    """A short text prompt and a long two-image prompt, completions of 2, 3 and 8 tokens."""
    short = Example([{"role": "user", "content": "Hi."}], "hi", "text")
    long = image_examples()[1]
    rollout = policy.sample([long, short], 2, max_new_tokens=8, seed=3)
    ids = torch.full_like(rollout.completion_ids, policy.tokenizer.convert_tokens_to_ids("a"))  # [4, 8]
    ids[2, 1:], ids[3, 2:] = policy.eos_ids[0], policy.eos_ids[0]  # the short prompt's rows: 2 and 3 tokens
    mask, truncated = completion_mask(ids, policy.eos_ids)
    return dataclasses.replace(rollout, completion_ids=ids, completion_mask=mask, truncated=truncated)


def test_padding_trim_keeps_the_log_probs_and_shortens_the_forward():
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl", score_prefix_once=False)  # whole rows: one forward each
    rollout = uneven_rollout(policy)
    widths = []
    handle = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    results = {}
    with torch.no_grad():
        for trim in (True, False):
            policy.trim_padding = trim
            results[trim] = [
                policy.token_log_probs(rollout, rows)[0] for rows in (torch.tensor([2, 3]), torch.arange(4))
            ]
    handle.remove()
    full = rollout.prompts.tensors["input_ids"].shape[1] + 8
    short_prompt = int(rollout.prompts.tensors["attention_mask"][1].sum())
    assert widths == [short_prompt + 3, full, full, full]  # the short rows alone: no padding, 3 columns
    for trimmed, untrimmed, rows in zip(results[True], results[False], ([2, 3], [0, 1, 2, 3]), strict=True):
        mask = rollout.completion_mask[rows]
        assert trimmed.shape == untrimmed.shape == mask.shape
        torch.testing.assert_close(trimmed[mask], untrimmed[mask], atol=1e-5, rtol=0)
    assert (results[True][0][:, 3:] == 0).all()  # columns no row of the chunk counts


class ForwardCount(Callback):
    """Records every forward of the policy's model: whether it ran with gradients, whether it
    decoded (KV cache) or scored, and whether LoRA adapters were switched off."""

    def __init__(self):
        self.calls = []

    def on_train_start(self, trainer, module):
        from peft.tuners.tuners_utils import BaseTunerLayer

        layers = [m for m in module.model.modules() if isinstance(m, BaseTunerLayer)]

        def record(model, args, kwargs):
            cache = kwargs.get("cache")
            if cache is not None and cache.get_seq_length() == 0:
                return  # a prompt prefill (sampling's, or a scoring pass's shared prefix): its pass counts once
            kind = "decode" if not model.training else ("train" if torch.is_grad_enabled() else "no_grad")
            self.calls.append((kind, any(layer.disable_adapters for layer in layers)))

        module.model.register_forward_pre_hook(record, with_kwargs=True)

    def count(self, kind: str) -> int:
        return sum(k == kind for k, _ in self.calls)


def fit(policy_kwargs: dict, **grpo) -> tuple[ForwardCount, int]:
    """One step on 2 prompts x 4 completions in micro-batches of 4 (2 chunks); returns the forward
    record and how many times a model was loaded."""
    loads = []
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3), **policy_kwargs)
    original = policy.load
    policy.load = lambda path: loads.append(path) or original(path)
    data = PretextDataModule(
        SyntheticScenes(size=20), Rotation(labels="letters", answer_format="bare"), batch_size=2, val_size=0
    )
    counter = ForwardCount()
    strategy = GRPOStrategy(num_generations=4, max_new_tokens=2, micro_batch_size=4, **grpo)
    Trainer(
        max_steps=1,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[counter],
        limit_val_batches=0,
    ).fit(policy, data)
    counter.policy = policy
    return counter, len(loads)


def test_one_iteration_scores_once_and_several_iterations_add_one_old_pass():
    one, _ = fit({}, num_iterations=1)
    assert one.count("train") == 2 and one.count("no_grad") == 0  # no old-log-prob pass: the ratio is 1
    two, _ = fit({}, num_iterations=2)
    assert two.count("train") == 4 and two.count("no_grad") == 2  # one old pass, reused by both iterations


def test_lora_reference_is_the_policy_with_adapters_off():
    counter, loads = fit({"lora": {"rank": 2}}, beta=0.04)
    assert loads == 1  # no reference copy
    scoring = [(kind, off) for kind, off in counter.calls if kind != "decode"]
    assert sorted(scoring) == [("no_grad", True)] * 2 + [("train", False)] * 2
    assert not any(off for kind, off in counter.calls if kind == "decode")


def test_reference_without_lora_is_a_copy_loaded_once():
    counter, loads = fit({}, beta=0.04)
    assert loads == 2 and counter.count("no_grad") == 0  # the reference passes ran on the copy


def test_a_step_with_each_prompt_scored_once_updates_as_whole_rows_do():
    """Micro-batches of one group each, the old-policy pass (two iterations) and the reference
    copy's (KL): the same weights after the step."""
    weights = {}
    for once in (True, False):
        counter, _ = fit({"score_prefix_once": once}, num_iterations=2, beta=0.04)
        weights[once] = {name: p.detach().clone() for name, p in counter.policy.model.named_parameters()}
    start = dict(load(QwenVLPolicy, "tiny:qwen2_5_vl").model.named_parameters())
    assert weights[True].keys() == weights[False].keys() == start.keys()
    for name, value in weights[False].items():
        torch.testing.assert_close(weights[True][name], value, atol=1e-6, rtol=1e-5, msg=name)
    assert sum(not torch.equal(value, start[name]) for name, value in weights[True].items()) > len(start) // 2
