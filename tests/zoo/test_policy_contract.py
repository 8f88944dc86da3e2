"""Every PolicyModule family x every tiny checkpoint it declares: encode, sample, score, train,
export."""

import dataclasses
import random

import pytest
import torch

import zoo
from tasks import Example, Rotation
from tasks.audio.common import resample
from tests.helpers import discover, make_item
from zoo import PolicyModule
from zoo.rollout.hf import SeededSampling
from zoo.rollout.seeds import example_row_seeds

POLICIES = discover(zoo, PolicyModule)
CASES = [(cls, ckpt) for cls in POLICIES for ckpt in cls.tiny_checkpoints]


def test_every_policy_declares_tiny_checkpoints():
    assert POLICIES, "no PolicyModule found"
    for cls in POLICIES:
        assert cls.tiny_checkpoints, f"{cls.__name__} declares no tiny checkpoints to test with"


def tiny_policy(case: tuple) -> PolicyModule:
    """The policy of a `CASES` entry, ``(class, tiny checkpoint)``, configured, seeded alike."""
    cls, ckpt = case
    torch.manual_seed(0)
    module = cls(pretrained=ckpt)
    module.configure_model()
    return module


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0].__name__}-{c[1]}")
def policy(request):
    return tiny_policy(request.param)


def image_examples() -> list[Example]:
    """Prompts with one image, two images of other sizes, and no image: media counts differ per
    row."""
    task = Rotation(answer_format="bare")
    one = task.make_example(make_item("image", 0), random.Random(0))
    two = Example(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "image": make_item("image", 1).resize((56, 84))},
                    {"type": "image", "image": make_item("image", 2).resize((84, 56))},
                    {"type": "text", "text": "Which image is taller?"},
                ],
            }
        ],
        "first",
        "two_images",
    )
    text = Example([{"role": "user", "content": "Say hi."}], "hi", "text")
    return [one, two, text]


def video_examples() -> list[Example]:
    """A video-only prompt and a prompt mixing an image and a shorter video at another frame
    rate."""
    video = make_item("video", 3)
    clip = {"type": "video", "video": video.frames[:6], "fps": video.fps}
    short = {"type": "video", "video": video.frames[::4], "fps": video.fps / 4}
    image = {"type": "image", "image": make_item("image", 4).resize((56, 56))}
    return [
        Example([{"role": "user", "content": [clip, {"type": "text", "text": "Which way?"}]}], "left", "v"),
        Example([{"role": "user", "content": [image, short, {"type": "text", "text": "Same?"}]}], "no", "iv"),
    ]


def point_cloud_examples() -> list[Example]:
    """A rotation prompt, a prompt with two clouds of other sizes (one xyz only), and no cloud."""
    from tasks import PointCloudRotation

    one = PointCloudRotation(answer_format="bare").make_example(make_item("point_cloud", 0), random.Random(0))
    two = Example(
        [
            {
                "role": "user",
                "content": [
                    {"type": "point_cloud", "points": make_item("point_cloud", 1).points[:200, :3]},
                    {"type": "point_cloud", "points": make_item("point_cloud", 2).points},
                    {"type": "text", "text": "Which is taller?"},
                ],
            }
        ],
        "first",
        "two_clouds",
    )
    text = Example([{"role": "user", "content": "Say hi."}], "hi", "text")
    return [one, two, text]


def audio_examples() -> list[Example]:
    """Two clips at 16 kHz and 22.05 kHz in one prompt, and one clip alone."""
    clip = make_item("audio", 5)
    wave, rate = clip.waveform, clip.sampling_rate
    first = {"type": "audio", "audio": wave[:rate], "sampling_rate": rate}
    other = {"type": "audio", "audio": resample(wave[rate // 2 :], rate, 22050), "sampling_rate": 22050}
    return [
        Example([{"role": "user", "content": [first, other, {"type": "text", "text": "Same?"}]}], "no", "aa"),
        Example([{"role": "user", "content": [first, {"type": "text", "text": "Loud?"}]}], "yes", "a"),
    ]


def audio_image_examples() -> list[Example]:
    """A clip and an image in one prompt (Qwen2.5-Omni)."""
    clip = make_item("audio", 6)
    audio = {"type": "audio", "audio": clip.waveform, "sampling_rate": clip.sampling_rate}
    image = {"type": "image", "image": make_item("image", 7).resize((56, 84))}
    return [Example([{"role": "user", "content": [audio, image, {"type": "text", "text": "Match?"}]}], "no", "ai")]


def examples_for(policy) -> list[Example]:
    examples = []
    if policy.content_kinds == {"text", "audio"}:
        examples += audio_examples() + [Example([{"role": "user", "content": "Say hi."}], "hi", "text")]
    if {"audio", "image"} <= policy.content_kinds:
        examples += audio_image_examples() + audio_examples()[1:]
    if "image" in policy.content_kinds:
        examples += image_examples()
    if "video" in policy.content_kinds:
        examples += video_examples()
    if "point_cloud" in policy.content_kinds:
        examples += point_cloud_examples()
    if not examples:
        raise NotImplementedError(f"add examples for {sorted(policy.content_kinds)}")
    return examples


def test_sample_shapes(policy):
    examples = examples_for(policy)
    rollout = policy.sample(examples, 3, max_new_tokens=5)
    n = 3 * len(examples)
    assert rollout.size == n and rollout.completion_ids.shape[0] == n
    assert rollout.completion_ids.shape[1] <= 5
    assert rollout.completion_mask.shape == rollout.completion_ids.shape
    assert rollout.completion_mask.dtype == torch.bool and rollout.completion_mask[:, 0].all()
    assert len(rollout.completions) == n and all(isinstance(t, str) for t in rollout.completions)
    assert rollout.truncated.shape == (n,)
    # a row that stopped holds exactly one EOS, at its last counted token
    for row, mask, cut in zip(rollout.completion_ids, rollout.completion_mask, rollout.truncated, strict=True):
        if not cut:
            assert row[mask][-1].item() in policy.eos_ids


def media_token_ids(policy) -> set[int]:
    """The placeholder ids media features replace: a spliced policy's own token, else the HF
    config's."""
    if hasattr(policy.model, "placeholder_id"):
        return {policy.model.placeholder_id}
    config = policy.model.config
    media = {
        getattr(config, key) for key in ("image_token_id", "video_token_id", "audio_token_id") if hasattr(config, key)
    }
    assert media, f"{type(policy).__name__}: no media token id found"
    return media


def test_completions_never_contain_banned_tokens(policy):
    torch.manual_seed(1)
    rollout = policy.sample(examples_for(policy), 8, max_new_tokens=12, temperature=1.5)
    used = set(rollout.completion_ids[rollout.completion_mask].tolist())
    assert not used & set(policy.banned_ids)
    assert media_token_ids(policy) <= set(policy.banned_ids)
    assert not set(policy.eos_ids) & set(policy.banned_ids)


def test_scoring_log_probs_match_the_sampling_distribution(policy):
    """Re-scoring a rollout reproduces the logits generate saw (same positions, rope, media), after
    the same temperature and suppression."""
    examples = examples_for(policy)
    rollout = policy.sample(examples, 2, max_new_tokens=6, temperature=0.7, seed=11)
    inputs = rollout.prompts.select([b for b in range(len(examples)) for _ in range(2)])
    policy.model.eval()
    out = policy.model.generate(
        **inputs,
        generation_config=policy.generation_config(6),
        output_logits=True,
        return_dict_in_generate=True,
        logits_processor=[SeededSampling(example_row_seeds(examples, 2, 11), inputs["input_ids"].shape[1], 0.7)],
    )
    policy.model.train()
    generated = out.sequences[:, inputs["input_ids"].shape[1] :]
    mask = rollout.completion_mask
    assert torch.equal(generated[mask], rollout.completion_ids[mask])  # the same seeded samples
    logits = torch.stack(out.logits, dim=1).float() / 0.7  # [N, L, V] raw logits of generate
    logits[..., policy.banned_ids] = float("-inf")
    expected = logits.log_softmax(-1).gather(-1, rollout.completion_ids[..., None]).squeeze(-1)
    with torch.no_grad():
        logps, entropy = policy.token_log_probs(rollout, torch.arange(rollout.size))
    torch.testing.assert_close(logps[mask], expected[mask], atol=2e-4, rtol=0)
    assert torch.isfinite(logps).all() and (entropy[mask] >= 0).all()


def test_seeded_sampling_depends_on_the_example_not_the_batch(policy):
    examples = examples_for(policy)
    batch = [dataclasses.replace(examples[i % len(examples)], uid=f"ex{i}") for i in range(4)]
    together = policy.sample(batch, 3, max_new_tokens=6, seed=5)
    for b in (1, 3):  # a batch of 1: other padding, other rows beside it
        alone = policy.sample(batch[b : b + 1], 3, max_new_tokens=6, seed=5)
        assert alone.completions == together.completions[3 * b : 3 * b + 3]
        ids = together.completion_ids[3 * b : 3 * b + 3, : alone.completion_ids.shape[1]]
        assert torch.equal(alone.completion_ids[alone.completion_mask], ids[alone.completion_mask])
    assert policy.sample(batch, 3, max_new_tokens=6, seed=6).completions != together.completions


def test_micro_batches_see_the_same_rows(policy):
    torch.manual_seed(3)
    rollout = policy.sample(examples_for(policy), 2, max_new_tokens=4)
    rows = torch.arange(rollout.size)
    with torch.no_grad():
        whole = policy.token_log_probs(rollout, rows)[0]
        parts = torch.cat([policy.token_log_probs(rollout, rows[i : i + 4])[0] for i in range(0, len(rows), 4)])
        shuffled = torch.tensor([5, 0, 3])
        picked = policy.token_log_probs(rollout, shuffled)[0]
    mask = rollout.completion_mask
    torch.testing.assert_close(parts[mask], whole[mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(picked[mask[shuffled]], whole[shuffled][mask[shuffled]], atol=1e-5, rtol=0)


def test_one_step_changes_trainable_and_only_trainable_parameters(policy):
    cls = type(policy)
    group = next(iter(policy.module_groups()))  # the encoder group: "vision" for Qwen-VL, "audio" for Qwen2-Audio
    module = cls(pretrained=policy.pretrained, freeze=[group])
    module.configure_model()
    always = {n for n, p in policy.named_parameters() if not p.requires_grad}  # frozen by the model itself
    frozen = {n for n, p in module.named_parameters() if not p.requires_grad} - always
    in_group = {id(p) for m in module.module_groups()[group] for p in m.parameters()}
    assert frozen and frozen == {n for n, p in module.named_parameters() if id(p) in in_group} - always
    if isinstance(module, zoo.QwenVLPolicy):
        assert all(".visual." in n and "merger" not in n for n in frozen)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.0)
    torch.manual_seed(4)
    rollout = module.sample(examples_for(module), 2, max_new_tokens=4)
    out = module.training_step(rollout, torch.arange(rollout.size))
    assert out["greedy"] is None  # GRPO's pass leaves out the flags only SFT reads
    mask = rollout.completion_mask
    (-(out["logps"] * mask).sum() - (out["entropy"] * mask).sum()).backward()
    optimizer.step()
    for name, param in module.named_parameters():
        changed = not torch.equal(before[name], param.detach())
        trained = name not in frozen and name not in always
        assert changed == trained, f"{name}: changed={changed}, trained={trained}"


def test_save_pretrained_round_trip(policy, tmp_path):
    policy.save_pretrained(tmp_path)
    reloaded = type(policy)(pretrained=str(tmp_path))
    reloaded.configure_model()
    examples = examples_for(policy)
    first = policy.sample(examples, 1, max_new_tokens=6, greedy=True)
    second = reloaded.sample(examples, 1, max_new_tokens=6, greedy=True)
    assert first.completions == second.completions
    assert torch.equal(first.completion_ids, second.completion_ids)


def test_unsupported_media_is_a_clear_error(policy):
    kinds = {"image", "video", "audio", "point_cloud"} - policy.content_kinds
    kind = sorted(kinds)[0]
    bad = Example(
        [{"role": "user", "content": [{"type": kind, kind: None}, {"type": "text", "text": "?"}]}], "x", "bad"
    )
    with pytest.raises(ValueError, match=kind):
        policy.encode([bad])


def test_unknown_freeze_group_is_a_clear_error(policy):
    module = type(policy)(pretrained=policy.pretrained, freeze=["wings"])
    with pytest.raises(ValueError, match="wings"):
        module.configure_model()


def test_lora_trains_only_adapters_and_its_reference_is_the_base(policy):
    """Default LoRA (language model only): one step moves the adapters and nothing else, and the
    reference log-probs (adapters off) stay those of the untrained policy."""
    module = type(policy)(pretrained=policy.pretrained, lora={"rank": 2})
    module.configure_model()
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    torch.manual_seed(5)
    rollout = module.sample(examples_for(module), 2, max_new_tokens=4)
    rows, mask = torch.arange(rollout.size), rollout.completion_mask
    with torch.no_grad():
        base = module.token_log_probs(rollout, rows)[0]
    optimizer = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=1.0)
    out = module.training_step(rollout, rows)
    (-(out["logps"] * mask).sum()).backward()
    optimizer.step()
    changed = {n for n, p in module.named_parameters() if not torch.equal(before[n], p.detach())}
    assert changed and changed <= trainable
    torch.testing.assert_close(module.reference_log_probs(rollout, rows)[mask], base[mask], atol=1e-5, rtol=0)
    assert "_reference" not in module.__dict__


def test_prefix_sharing_gives_the_same_completions(policy):
    """Prompts of different lengths (left padded) and media: sampling from one prefill per prompt
    with the cache repeated G times gives, token for token, the completions of G copies of each
    prompt, with the dynamic and the static cache; G = 1 gives the first of each group (row noise is
    keyed by example and g)."""
    examples = examples_for(policy)
    for i, ex in enumerate(examples):
        ex.uid = f"ex{i}"
    copies = policy.sample(examples, 2, max_new_tokens=6, seed=3, share_prefix=False)
    batches = []
    hook = policy.model.register_forward_hook(
        lambda m, args, kwargs, out: batches.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    try:
        shared = policy.sample(examples, 2, max_new_tokens=6, seed=3, share_prefix=True)
    finally:
        hook.remove()
    assert batches[0] == (len(examples), copies.prompts.tensors["input_ids"].shape[1] - 1)  # one prefill, B rows
    assert all(rows == 2 * len(examples) for rows, _ in batches[1:])
    assert torch.equal(shared.completion_ids, copies.completion_ids) and shared.completions == copies.completions
    assert len(set(copies.completions)) > 1
    policy.cache_implementation = "static"
    try:
        static = policy.sample(examples, 2, max_new_tokens=6, seed=3, share_prefix=True)
    finally:
        policy.cache_implementation = "dynamic"
    assert torch.equal(static.completion_ids, copies.completion_ids)
    single = policy.sample(examples, 1, max_new_tokens=6, seed=3, share_prefix=True)
    assert single.completions == copies.completions[::2]
