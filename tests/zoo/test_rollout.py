"""Completion masks, cache expansion for prefix sharing, and the sampling options (seeded sampling:
test_sampling.py)."""

import pytest
import torch
from transformers.cache_utils import DynamicCache, StaticCache
from transformers.configuration_utils import PreTrainedConfig

from zoo import QwenVLPolicy
from zoo.rollout.decode import expand_cache
from zoo.rollout.rollout import completion_mask


def test_completion_mask_by_hand():
    ids = torch.tensor([[5, 9, 7, 9], [5, 6, 7, 8], [9, 1, 1, 1]])  # 9 is the EOS
    mask, truncated = completion_mask(ids, [9])
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert truncated.tolist() == [False, True, False]
    mask, truncated = completion_mask(ids, [7, 9])  # several EOS ids: the first one counts
    assert mask[1].tolist() == [1, 1, 1, 0] and not truncated.any()


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
