"""zoo's decoding loop (`zoo.rollout.decode`) against Hugging Face ``generate``
(`HFEngine(loop="generate")`): the same tokens for every policy family, sampled and greedy, with and
without prefix sharing, the dynamic and the static cache, and rows that end early."""

import pytest
import torch
from transformers.cache_utils import DynamicLayer

from tests.zoo.test_policy_contract import CASES, examples_for
from zoo.rollout.decode import InPlaceLayer


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0].__name__}-{c[1]}")
def policy(request):
    cls, ckpt = request.param
    torch.manual_seed(0)
    module = cls(pretrained=ckpt)
    module.configure_model()
    return module


def both_loops(policy, examples, **kwargs) -> dict[str, torch.Tensor]:
    out = {}
    try:
        for loop in ("generate", "zoo"):
            policy.engine.loop = loop
            out[loop] = policy.sample(examples, 2, max_new_tokens=7, **kwargs).completion_ids  # [N, L]
    finally:
        policy.engine.loop = "zoo"
    return out


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_the_loop_samples_what_generate_samples(policy, cache):
    examples = examples_for(policy)
    for i, ex in enumerate(examples):
        ex.uid = f"ex{i}"
    policy.cache_implementation = cache
    try:
        for kwargs in ({"seed": 3}, {"greedy": True}, {"seed": 4, "share_prefix": False, "top_p": 0.9}):
            out = both_loops(policy, examples, **kwargs)
            assert torch.equal(out["zoo"], out["generate"]), kwargs
    finally:
        policy.cache_implementation = "dynamic"


def test_rows_that_end_early_stop_and_pad_as_in_generate(policy):
    """A token the policy samples early in some rows is made an EOS id: those rows end there,
    padded with the first EOS id, the others go on."""
    examples = examples_for(policy)
    first = policy.sample(examples, 2, max_new_tokens=7, seed=5).completion_ids  # [N, 7]
    counts = torch.bincount(first[:, 1:3].flatten())
    stop = int(counts.argmax())  # sampled in the 2nd or 3rd position of the most rows
    eos = policy.eos_ids
    policy.eos_ids = [*eos, stop]
    try:
        out = both_loops(policy, examples, seed=5)
    finally:
        policy.eos_ids = eos
    assert torch.equal(out["zoo"], out["generate"])
    ended = (out["zoo"] == stop).any(1)  # [N]
    assert ended.any() and out["zoo"].shape[1] >= 3
    if out["zoo"].shape[1] == 7:
        assert not ended.all()


def test_the_cache_is_written_in_place():
    layer = DynamicLayer()
    keys, values = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5)  # [N, H, positions, D]
    layer.update(keys, values)
    grown = InPlaceLayer.from_layer(layer, capacity=7)
    buffer = grown.keys.data_ptr()
    for _ in range(3):
        step = torch.randn(2, 3, 1, 5), torch.randn(2, 3, 1, 5)
        assert all(torch.equal(a, b) for a, b in zip(grown.update(*step), layer.update(*step), strict=True))
        assert grown.keys.data_ptr() == buffer  # no new tensor: written into the buffer
    assert grown.get_seq_length() == layer.get_seq_length() == 7
