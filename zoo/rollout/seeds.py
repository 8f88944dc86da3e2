"""Seeded sampling noise that does not depend on where a row runs.

Token ``t`` of row ``n`` is drawn with Gumbel-max noise that is a hash of (the row's seed, t, token
id), computed with integer arithmetic that gives the same bits on every device. A row's seed comes
from its example's uid and its sample index, so a row's completion depends only on its example and
the step, never on which rank or batch position it landed in: a global batch gives the same rollouts
on 1 process or on N.
"""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN, _MIX1, _MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


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


def gumbel_noise(seeds: Tensor, position: int, vocab: int) -> Tensor:
    """Gumbel(0, 1) noise ``[N, V]`` for decoding ``position`` of rows with ``seeds`` (``[N]``
    int64)."""
    base = splitmix64(seeds ^ splitmix64(torch.full_like(seeds, position)))[:, None]  # [N, 1]
    bits = splitmix64(base + torch.arange(1, vocab + 1, device=seeds.device)[None, :] * _GOLDEN)  # [N, V]
    uniform = (_shr(bits, 11).double() + 0.5) / float(1 << 53)  # (0, 1)
    return -torch.log(-torch.log(uniform))
