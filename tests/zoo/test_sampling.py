"""Seeded inverse-CDF sampling (`zoo.rollout.seeds`, `zoo.rollout.hf.SeededSampling`): the hash
against a reference, the draw by hand, the sampled distribution by a chi-square test, top-p against
Hugging Face's warper, banned ids, and independence from the batch."""

import pytest
import torch
from transformers import TopPLogitsWarper

from zoo.rollout.hf import SeededSampling
from zoo.rollout.seeds import (
    BLOCK,
    NUCLEUS_FIRST,
    inverse_cdf,
    nucleus,
    row_seeds,
    row_uniforms,
    splitmix64,
    uniform_table,
)

#: Significance level of the goodness-of-fit tests: a correct sampler fails one with this
#: probability (the seeds are fixed, so a pass is a pass for good).
ALPHA = 1e-3
DRAWS = 20_000
SEEDS = row_seeds([str(i) for i in range(DRAWS)], seed=0)
MASK = (1 << 64) - 1


def reference_splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def test_splitmix64_matches_the_reference_bit_for_bit():
    values = [0, 1, 12345, 2**63 - 1, -1, -(2**63)]
    got = splitmix64(torch.tensor(values, dtype=torch.long)).tolist()
    assert [g & MASK for g in got] == [reference_splitmix64(v & MASK) for v in values]


def test_row_uniforms_are_a_hash_of_seed_and_position_only():
    seeds = row_seeds(["a", "b", "c"], seed=1)
    for position in (0, 1, 77):
        expected = [
            (reference_splitmix64((s & MASK) ^ reference_splitmix64(position)) >> 11) / 2**53 for s in seeds.tolist()
        ]
        assert row_uniforms(seeds, position).tolist() == expected
    assert row_uniforms(seeds[1:], 3).tolist() == row_uniforms(seeds, 3)[1:].tolist()  # a row alone: the same
    assert not torch.equal(row_uniforms(seeds, 0), row_uniforms(seeds, 1))
    table = uniform_table(seeds, 6)  # [N, 6]: what zoo's decoding loop draws with
    assert all(torch.equal(table[:, t], row_uniforms(seeds, t)) for t in range(6))
    assert not torch.equal(seeds, row_seeds(["a", "b", "c"], seed=2))


def test_inverse_cdf_by_hand():
    weights = torch.tensor([[0.0, 1.0, 0.0, 3.0]])  # intervals: token 1 [0, 1/4), token 3 [1/4, 1)
    uniforms = [0.0, 0.2499, 0.25, 0.9999, 1 - 2**-53]
    picks = [inverse_cdf(weights, torch.tensor([u], dtype=torch.float64)).item() for u in uniforms]
    assert picks == [1, 1, 3, 3, 3]


def test_inverse_cdf_across_blocks_never_picks_a_zero_weight():
    weights = torch.zeros(1, 2 * BLOCK + 44)  # three blocks, the last one padded; a zero tail like banned rows
    weights[0, [5, BLOCK + 2, 2 * BLOCK + 4]] = torch.tensor([1.0, 2.0, 1.0])  # intervals of 1/4, 1/2, 1/4
    uniforms = torch.tensor([0.0, 0.2499, 0.25, 0.7499, 0.75, 1 - 2**-53], dtype=torch.float64)
    picks = inverse_cdf(weights.expand(len(uniforms), -1), uniforms)
    assert picks.tolist() == [5, 5, BLOCK + 2, BLOCK + 2, 2 * BLOCK + 4, 2 * BLOCK + 4]


def draw(logits: torch.Tensor, temperature: float, top_p: float = 1.0, banned=()) -> torch.Tensor:
    """One token for each of `DRAWS` rows (seeds 0..DRAWS-1, one generated position) from the same
    scores."""
    sampler = SeededSampling(SEEDS, 0, temperature, top_p, banned)
    out = sampler(torch.zeros(DRAWS, 0, dtype=torch.long), logits.expand(DRAWS, -1))  # [DRAWS, V]
    assert (torch.isfinite(out).sum(-1) == 1).all()  # one finite score per row: greedy takes the draw
    return out.argmax(-1)


def chi_square_p(picks: torch.Tensor, probs: torch.Tensor) -> float:
    """p-value of Pearson's chi-square test that ``picks`` were drawn from ``probs`` (``[V]``); 0
    when a token of probability 0 was picked."""
    observed = torch.bincount(picks, minlength=len(probs)).double()
    if observed[probs == 0].any():
        return 0.0
    expected = probs.double()[probs > 0] * len(picks)
    assert expected.min() >= 5, "too few draws for the chi-square approximation"
    statistic = ((observed[probs > 0] - expected) ** 2 / expected).sum()
    dof = torch.tensor((len(expected) - 1) / 2, dtype=torch.float64)
    return torch.special.gammaincc(dof, statistic / 2).item()  # the chi-square survival function


def intended(logits: torch.Tensor, temperature: float, top_p: float = 1.0, banned=()) -> torch.Tensor:
    """The distribution to sample, by Hugging Face's warpers: banned ids removed, temperature,
    top-p."""
    scores = (logits / temperature).index_fill(-1, torch.tensor(list(banned), dtype=torch.long), float("-inf"))
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores[None])[0]
    return scores.softmax(-1)


SMALL = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 1.5])
WIDE = torch.linspace(-1.0, 1.0, 2 * BLOCK + 30)[
    torch.randperm(2 * BLOCK + 30, generator=torch.Generator().manual_seed(0))
]
CASES = {
    "tempered": (SMALL, 0.7, 1.0, [5]),
    "hot": (SMALL, 1.6, 1.0, [0]),
    "top_p": (SMALL, 0.7, 0.8, [5]),
    "three blocks": (WIDE, 1.3, 1.0, range(2 * BLOCK + 10, 2 * BLOCK + 30)),
}


@pytest.mark.parametrize("case", CASES)
def test_samples_follow_the_filtered_softmax(case):
    logits, temperature, top_p, banned = CASES[case]
    picks = draw(logits, temperature, top_p, banned)
    assert chi_square_p(picks, intended(logits, temperature, top_p, banned)) > ALPHA


@pytest.mark.parametrize("wrong", ["untempered", "no nucleus"])
def test_the_chi_square_test_rejects_a_wrong_sampler(wrong):
    """The test has power: draws from the untempered softmax (or the full one, under top-p) fail
    it."""
    logits, temperature, top_p, banned = CASES["top_p" if wrong == "no nucleus" else "tempered"]
    picks = draw(logits, 1.0, top_p, banned) if wrong == "untempered" else draw(logits, temperature, 1.0, banned)
    assert chi_square_p(picks, intended(logits, temperature, top_p, banned)) < ALPHA


@pytest.mark.parametrize("top_p", [0.3, 0.9, 0.99])
@pytest.mark.parametrize("spread", [4.0, 0.05])  # peaked: a nucleus among the first ranked; flat: larger
def test_nucleus_keeps_what_hugging_face_top_p_keeps(top_p, spread):
    logits = torch.randn(6, 3 * NUCLEUS_FIRST, generator=torch.Generator().manual_seed(1)) * spread
    kept = nucleus((logits - logits.amax(-1, keepdim=True)).exp(), top_p) > 0  # [6, V]
    assert torch.equal(kept, torch.isfinite(TopPLogitsWarper(top_p)(None, logits)))
    if spread < 1 and top_p > 0.5:
        assert kept.sum(-1).min() > NUCLEUS_FIRST  # ranks more than the first NUCLEUS_FIRST


def test_banned_ids_are_never_drawn_even_when_most_probable():
    logits = torch.tensor([5.0, 4.0, 0.0, -1.0, 3.0])
    picks = draw(logits, 2.0, 1.0, banned=[0, 1])
    assert not torch.isin(picks, torch.tensor([0, 1])).any() and set(picks.tolist()) == {2, 3, 4}


def test_top_p_removes_the_tail_before_the_draw():
    picks = draw(torch.tensor([5.0, 0.0, -5.0, -5.0]), 1.0, top_p=0.5)
    assert (picks == 0).all()


def test_seeded_sampling_counts_generated_positions_only():
    seeds = row_seeds([str(i) for i in range(16)], seed=0)
    scores = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    short = SeededSampling(seeds, prompt_length=3)(torch.zeros(16, 4, dtype=torch.long), scores)
    long = SeededSampling(seeds, prompt_length=10)(torch.zeros(16, 11, dtype=torch.long), scores)
    assert torch.equal(short, long)  # both at generated position 1, whatever the padding
    other = SeededSampling(seeds, prompt_length=3)(torch.zeros(16, 5, dtype=torch.long), scores)
    assert not torch.equal(short, other)


@pytest.mark.parametrize("top_p", [1.0, 0.95])
def test_a_row_draws_the_same_token_alone_or_in_a_batch_at_the_real_vocabulary(top_p):
    vocab = 151_936  # Qwen2.5-VL's rows, the last 271 past its tokenizer banned
    scores = torch.randn(4, vocab, generator=torch.Generator().manual_seed(0)) * 3
    seeds = row_seeds(["a", "b", "c", "d"], seed=0)
    banned = range(151_665, vocab)
    batch = SeededSampling(seeds, 0, 0.9, top_p, banned)(torch.zeros(4, 0, dtype=torch.long), scores).argmax(-1)
    for n in range(4):
        alone = SeededSampling(seeds[n : n + 1], 0, 0.9, top_p, banned)(
            torch.zeros(1, 0, dtype=torch.long), scores[n : n + 1]
        )
        assert alone.argmax(-1).item() == batch[n].item()
