"""zoo's decoding loop (`zoo.rollout.decode`) against Hugging Face ``generate``
(`HFEngine(loop="generate")`): the same tokens for every policy family, sampled and greedy, with and
without prefix sharing, the dynamic and the static cache, and rows that end early."""

import pytest
import torch
from transformers.cache_utils import DynamicLayer

from tests.zoo.test_policy_contract import CASES, examples_for, tiny_policy
from zoo.rollout.engine import Prompts, Sampling
from zoo.rollout.inplace import InPlaceLayer
from zoo.rollout.seeds import example_row_seeds


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0].__name__}-{c[1]}")
def policy(request):
    return tiny_policy(request.param)


@torch.no_grad()
def both_loops(policy, examples, seed=0, greedy=False, top_p=1.0, share_prefix=None) -> dict[str, torch.Tensor]:
    """What the engine returns, ``[N, L]`` (padding included), with each loop: 2 samples of each
    example, at most 7 tokens."""
    prompts = Prompts(list(examples), policy.encode(examples))
    seeds = None if greedy else example_row_seeds(examples, 2, seed)
    eos, banned = tuple(policy.eos_ids), tuple(policy.banned_ids)
    sampling = Sampling(7, 1.0, top_p, greedy, seeds, eos, banned, share_prefix)
    out = {}
    try:
        for loop in ("generate", "zoo"):
            policy.engine.loop = loop
            out[loop] = policy.engine.generate(prompts, 2, sampling)
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
    ids = out["zoo"]  # [N, L]
    ended = (ids == stop).any(1)  # [N]
    assert ended.any() and ids.shape[1] >= 3
    assert ids.shape[1] < 7 or not ended.all()  # the loop stops once every row ended
    for row in ids[ended]:
        after = row[int((row == stop).nonzero()[0]) + 1 :]
        assert (after == eos[0]).all()  # padded with the first EOS id, as generate pads


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
