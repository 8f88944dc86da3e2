"""Seeded sampling that does not depend on where a row runs.

Token ``t`` of row ``n`` is drawn by inverse-CDF sampling: one uniform, a hash of (the row's seed,
t) computed with integer arithmetic that gives the same bits on every device, picks the token whose
interval of the cumulative distribution holds it. A row's seed comes from its example's uid and its
sample index, so a row's completion depends only on its example and the step, never on which rank
or batch position it landed in: a global batch gives the same rollouts on 1 process or on N.

Only the uniform is random, so a decoding step costs one exponential, one block sum and a search per
vocabulary entry; the Gumbel-max noise used before hashed every vocabulary entry and took two
float64 logs of it (84 ms per token at 151,936 entries).
"""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F
from torch import Tensor


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN, _MIX1, _MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))

#: Vocabulary entries per block of the two-level search (`inverse_cdf`).
BLOCK = 128
#: Tokens `nucleus` ranks first; it ranks 8 times more while a row's nucleus is larger.
NUCLEUS_FIRST = 1024


def _shr(x: Tensor, k: int) -> Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def splitmix64(x: Tensor) -> Tensor:
    """The splitmix64 finaliser on int64 tensors (multiplication wraps modulo 2**64)."""
    x = x + _GOLDEN
    x = (x ^ _shr(x, 30)) * _MIX1
    x = (x ^ _shr(x, 27)) * _MIX2
    return x ^ _shr(x, 31)


def row_seeds(keys: list[str], seed: int) -> Tensor:
    """One int64 seed per row from a string key per row and a base seed (the same in every
    process)."""
    digests = (hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8] for key in keys)
    return torch.tensor([int.from_bytes(d, "little", signed=True) for d in digests], dtype=torch.long)


def example_row_seeds(examples: list, num_generations: int, seed: int) -> Tensor:
    """Seeds of rows ``(b, g)``: from each example's ``uid`` (its batch position when it has none)
    and g."""
    keys = [f"{ex.uid or b}:{g}" for b, ex in enumerate(examples) for g in range(num_generations)]
    return row_seeds(keys, seed)


def row_uniforms(seeds: Tensor, position: int) -> Tensor:
    """Uniform [0, 1) float64 ``[N]`` for decoding ``position`` of rows with ``seeds`` (``[N]``
    int64): the top 53 bits of a hash of (seed, position)."""
    bits = splitmix64(seeds ^ splitmix64(torch.full_like(seeds, position)))  # [N]
    return _shr(bits, 11).double() / float(1 << 53)


def uniform_table(seeds: Tensor, positions: int) -> Tensor:
    """`row_uniforms` of positions ``0 .. positions - 1`` at once, ``[N, positions]`` (column t is
    ``row_uniforms(seeds, t)``, bit for bit)."""
    steps = splitmix64(torch.arange(positions, device=seeds.device))  # [L]
    bits = splitmix64(seeds[:, None] ^ steps[None, :])  # [N, L]
    return _shr(bits, 11).double() / float(1 << 53)


def nucleus(weights: Tensor, top_p: float) -> Tensor:
    """``weights`` ``[N, V]`` (unnormalised probabilities) with every token outside the top-p
    nucleus set to 0.

    The nucleus holds the most probable tokens while the mass ranked before each is under ``top_p``
    of the row's total (as Hugging Face's ``TopPLogitsWarper``; ties with the last one are kept
    too). Only the ``NUCLEUS_FIRST`` largest are ranked (a full sort of 151,936 entries takes half a
    second per 32 rows), more only while a row's nucleus does not end among them.
    """
    total = weights.sum(-1, keepdim=True).double()  # [N, 1]
    k = min(NUCLEUS_FIRST, weights.shape[-1])
    while True:
        ranked = weights.topk(k, dim=-1).values.double()  # [N, k], descending
        before = F.pad(ranked.cumsum(-1), (1, 0))[:, :-1]  # [N, k] mass ranked before each
        inside = before < top_p * total  # [N, k], a prefix of each row
        if k == weights.shape[-1] or not inside[:, -1].any():
            break
        k = min(8 * k, weights.shape[-1])
    last = ranked.gather(-1, inside.sum(-1, keepdim=True) - 1).float()  # [N, 1] smallest kept weight
    return weights.masked_fill(weights < last, 0.0)


def _search(cdf: Tensor, target: Tensor) -> Tensor:
    """Index ``[N, 1]`` of the first entry of each nondecreasing row of ``cdf`` ``[N, M]`` above
    ``target`` ``[N, 1]``; a target at or past the row's total (rounding) takes the row's last
    positive step, so a zero-weight entry is never returned."""
    found = torch.searchsorted(cdf, target, right=True)
    last = (cdf < cdf[:, -1:]).sum(-1, keepdim=True)  # the first index reaching the total
    return torch.minimum(found, last)


def inverse_cdf(weights: Tensor, uniforms: Tensor) -> Tensor:
    """The token ``[N]`` of each row whose interval of the cumulative ``weights`` ``[N, V]``
    (nonnegative, unnormalised; vocabulary order) holds ``uniforms`` ``[N]`` times the row's total.

    Two levels, so that only one exponential and one float32 sum touch every entry: the cumulative
    sums (float64) of blocks of ``BLOCK`` entries pick the block, then the cumulative sum of that
    block's entries picks the token. A float32 cumulative sum over the whole vocabulary would round
    each step to the running total's precision and move about 0.2% of the mass at 151,936 entries.
    """
    n, vocab = weights.shape
    padded = weights if vocab % BLOCK == 0 else F.pad(weights, (0, -vocab % BLOCK))  # a copy: only when needed
    blocks = padded.view(n, -1, BLOCK)  # [N, V / K, K]
    block_cdf = blocks.sum(-1).double().cumsum(-1)  # [N, V / K]
    target = uniforms[:, None] * block_cdf[:, -1:]  # [N, 1]
    block = _search(block_cdf, target)  # [N, 1]
    start = F.pad(block_cdf, (1, 0)).gather(-1, block)  # [N, 1] mass of the blocks before
    inner = blocks.gather(1, block[..., None].expand(n, 1, BLOCK)).squeeze(1).double().cumsum(-1)  # [N, K]
    return (block * BLOCK + _search(inner, target - start)).squeeze(-1)


def sample_tokens(
    logits: Tensor, uniforms: Tensor, temperature: float = 1.0, top_p: float = 1.0, banned: Tensor | None = None
) -> Tensor:
    """One token ``[N]`` per row of ``logits`` ``[N, V]``, drawn from ``softmax(logits /
    temperature)`` without the ``banned`` entries (``[V]`` bool) and restricted to its top-p
    nucleus, at quantile ``uniforms`` ``[N]``."""
    n, vocab = logits.shape
    # one float32 copy, its width a whole number of blocks (the tail's weight is exp(-inf) = 0)
    weights = logits.new_empty((n, vocab + -vocab % BLOCK), dtype=torch.float32)  # [N, V']
    weights[:, vocab:] = float("-inf")
    weights[:, :vocab] = logits
    if banned is not None:
        weights[:, :vocab].masked_fill_(banned, float("-inf"))
    weights = weights.sub_(weights.amax(-1, keepdim=True))
    if temperature != 1.0:  # x / 1 is x: the pass is skipped, not the rounding changed
        weights = weights.div_(temperature)
    weights = weights.exp_()  # [N, V'], the largest is 1
    if top_p < 1:
        weights = nucleus(weights, top_p)
    return inverse_cdf(weights, uniforms)
