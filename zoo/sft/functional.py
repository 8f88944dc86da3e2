"""Supervised fine-tuning math as pure tensor functions: the negative log-likelihood of
demonstration tokens (teacher forcing) and its token accuracy. A GRPO loss can add `sft_loss` to its
own (SRFT, CHORD, LUFFY).

Shapes: N demonstration rows, L completion tokens (the demonstration, through its end-of-turn
    token).
"""

from __future__ import annotations

import torch
from torch import Tensor

NORMALISERS = ("token", "sequence")


def token_nll(logps: Tensor, mask: Tensor, weights: Tensor | None = None) -> Tensor:
    """Per-token negative log-likelihood, 0 where ``mask`` is False, ``[N, L]``.

    Args:
        logps: Log-probs of the demonstration tokens under the policy, ``[N, L]``; positions outside
            the mask may hold anything, -inf included (a masked-out padding id), without making the
            result NaN.
        mask: Tokens that count, ``[N, L]`` (bool or 0/1).
        weights: Optional per-token weights ``[N, L]`` (CHORD/SRFT-style token weighting); None
            weighs all 1.
    """
    keep = mask.bool()
    nll = torch.where(keep, -logps, torch.zeros_like(logps))  # where, not a product: 0 * inf is NaN
    return nll if weights is None else nll * weights


def sft_loss(
    logps: Tensor, mask: Tensor, normaliser: str = "token", divisor: float | None = None, weights: Tensor | None = None
) -> Tensor:
    """Negative log-likelihood of the demonstrations, to be minimised.

    Args:
        logps: Log-probs of the demonstration tokens, ``[N, L]``.
        mask: The assistant tokens that are trained, ``[N, L]``.
        normaliser: ``token``: the sum over every counted token, divided by ``divisor`` (default:
            their number, a mean per token, so long answers weigh more). ``sequence``: each row's
            mean over its tokens, summed and divided by ``divisor`` (default: the rows with a token;
            every demonstration weighs alike).
        divisor: The denominator; pass the count of the whole (global) batch so that micro-batches
            add up to the batch's loss, or 1 for a sum.
        weights: Optional per-token weights ``[N, L]``.
    """
    if normaliser not in NORMALISERS:
        raise ValueError(f"normaliser must be one of {NORMALISERS}, got {normaliser!r}")
    nll = token_nll(logps, mask, weights)  # [N, L]
    counts = mask.to(nll.dtype).sum(dim=1)  # [N]
    if normaliser == "token":
        total = nll.sum()
        count = counts.sum()
    else:
        total = (nll.sum(dim=1) / counts.clamp(min=1)).sum()
        count = (counts > 0).sum()
    return total / (float(count.clamp(min=1)) if divisor is None else divisor)


def token_accuracy(greedy: Tensor, mask: Tensor) -> tuple[float, float]:
    """``(correct, counted)``: how many counted tokens are the policy's most likely next token, and
    how many tokens count (sums, so that micro-batches and ranks add up).

    Args:
        greedy: Whether each demonstration token is the argmax of the policy's distribution, ``[N,
            L]`` bool.
        mask: Tokens that count, ``[N, L]``.
    """
    keep = mask.bool()
    return float((greedy & keep).sum()), float(keep.sum())
