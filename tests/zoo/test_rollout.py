"""Completion masks, seeded sampling noise, cache expansion for prefix sharing, and the sampling
options."""

import pytest
import torch
from transformers.cache_utils import DynamicCache, StaticCache
from transformers.configuration_utils import PreTrainedConfig

from zoo import QwenVLPolicy
from zoo.rollout.hf import SeededSampling, expand_cache
from zoo.rollout.rollout import completion_mask
from zoo.rollout.seeds import gumbel_noise, row_seeds, splitmix64


def test_completion_mask_by_hand():
    ids = torch.tensor([[5, 9, 7, 9], [5, 6, 7, 8], [9, 1, 1, 1]])  # 9 is the EOS
    mask, truncated = completion_mask(ids, [9])
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert truncated.tolist() == [False, True, False]
    mask, truncated = completion_mask(ids, [7, 9])  # several EOS ids: the first one counts
    assert mask[1].tolist() == [1, 1, 1, 0] and not truncated.any()


def reference_splitmix64(x: int) -> int:
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def test_splitmix64_matches_the_reference_bit_for_bit():
    values = [0, 1, 12345, 2**63 - 1, -1, -(2**63)]
    got = splitmix64(torch.tensor(values, dtype=torch.long)).tolist()
    assert [g & ((1 << 64) - 1) for g in got] == [reference_splitmix64(v & ((1 << 64) - 1)) for v in values]


def test_gumbel_max_samples_the_softmax():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    seeds = row_seeds([str(i) for i in range(100_000)], seed=0)
    picks = (logits + gumbel_noise(seeds, 3, 4).float()).argmax(-1)
    freq = torch.bincount(picks, minlength=4).float() / len(picks)
    # binomial std of the largest frequency (0.64) over 1e5 draws is 0.0015
    torch.testing.assert_close(freq, logits.softmax(-1), atol=0.006, rtol=0)


def test_noise_depends_on_seed_and_position_only():
    seeds = row_seeds(["a", "b"], seed=1)
    first = gumbel_noise(seeds, 0, 50)
    assert torch.equal(first, gumbel_noise(seeds, 0, 50))
    assert torch.equal(first[1:], gumbel_noise(seeds[1:], 0, 50))  # a row alone draws the same noise
    assert not torch.equal(first, gumbel_noise(seeds, 1, 50))
    assert not torch.equal(first[0], first[1])
    assert not torch.equal(seeds, row_seeds(["a", "b"], seed=2))


def test_seeded_sampling_counts_generated_positions_only():
    seeds = row_seeds(["x"], seed=0)
    scores = torch.zeros(1, 8)
    short = SeededSampling(seeds, prompt_length=3)(torch.zeros(1, 4, dtype=torch.long), scores)
    long = SeededSampling(seeds, prompt_length=10)(torch.zeros(1, 11, dtype=torch.long), scores)
    assert torch.equal(short, long)  # both at generated position 1, whatever the padding


def test_top_p_removes_the_tail_before_the_draw():
    scores = torch.tensor([[5.0, 0.0, -5.0, -5.0]])
    seeds = row_seeds([str(i) for i in range(200)], seed=0)
    out = SeededSampling(seeds, 0, top_p=0.5)(torch.zeros(200, 0, dtype=torch.long), scores.expand(200, 4))
    assert (out.argmax(-1) == 0).all()


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_expand_cache_repeats_each_row_in_place_of_its_group(kind):
    config = PreTrainedConfig(num_hidden_layers=2, num_attention_heads=1, num_key_value_heads=1, hidden_size=4)
    cache = DynamicCache(config=config) if kind == "dynamic" else StaticCache(config=config, max_cache_len=5)
    keys = torch.arange(2.0)[:, None, None, None].expand(2, 1, 3, 4)  # row b holds b: [B=2, heads, T=3, D]
    for layer in range(2):
        cache.update(keys, -keys, layer)
    expand_cache(cache, 3)
    for layer in cache.layers:
        assert layer.keys.shape[0] == 6
        assert layer.keys[:, 0, :3, 0].tolist() == [[0.0] * 3] * 3 + [[1.0] * 3] * 3  # rows 0,0,0,1,1,1
        assert torch.equal(layer.values[:, :, :3], -layer.keys[:, :, :3])
    assert cache.get_seq_length() == 3


def test_compile_decode_needs_the_static_cache():
    with pytest.raises(ValueError, match="static"):
        QwenVLPolicy("tiny:qwen2_5_vl", compile_decode=True)
    with pytest.raises(ValueError, match="cache_implementation"):
        QwenVLPolicy("tiny:qwen2_5_vl", cache_implementation="paged")
    policy = QwenVLPolicy("tiny:qwen2_5_vl", cache_implementation="static", compile_decode=True)
    policy.eos_ids, policy.banned_ids = [0], []
    config = policy.generation_config(4)
    assert config.cache_implementation == "static" and not config.disable_compile
