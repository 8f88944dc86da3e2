"""Supervised+RL hybrid math as pure tensor functions: LUFFY's shaped importance weight of an expert
token and SRFT's entropy-aware weights. The SFT term itself is `zoo.sft.functional.sft_loss`.

Shapes: n rows, L completion tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor


def shaped(logps: Tensor, gamma: float) -> Tensor:
    """LUFFY's policy shaping ``f(pi) = pi / (pi + gamma)`` of each token's probability ``pi =
    exp(logp)``: the importance weight ``pi / pi_b`` of an expert token whose behaviour probability
    ``pi_b`` is unknown and taken as 1, regularised so that low-probability tokens keep a gradient
    (``gamma = 0`` leaves ``pi``), ``[n, L]``."""
    probs = logps.exp()
    return probs if gamma == 0 else probs / (probs + gamma)


def expert_surrogate(logps: Tensor, advantages: Tensor, gamma: float) -> Tensor:
    """The off-policy term of an expert row, ``-A * f(pi)`` per token (LUFFY's mixed-policy
    objective: no ratio to an old policy, no clipping), to be minimised, ``[n, L]``.

    Args:
        logps: Log-probs of the expert's tokens under the policy, ``[n, L]``.
        advantages: ``[n]``, computed with the expert rows in their groups.
        gamma: The shaping constant of `shaped`.
    """
    return -advantages[:, None] * shaped(logps, gamma)


def entropy_weight(entropy: Tensor, coef: float, sign: float) -> Tensor:
    """``coef * exp(sign * H)`` per token, without gradient (SRFT's stop-grad weights), ``[n, L]``:
    ``sign = -1`` is ``w_SFT`` (less imitation where the policy is unsure), ``+1`` is ``w_RL`` (less
    reinforcement of its own right answers where it is already sure)."""
    return coef * torch.exp(sign * entropy.detach())


def positive_weights(entropy: Tensor, advantages: Tensor, coef: float, entropy_aware: bool = True) -> Tensor:
    """SRFT's weight of the on-policy surrogate: ``w_RL = coef * exp(H)`` on the tokens of rows with
    a positive advantage (``coef`` alone without ``entropy_aware``), 1 elsewhere, ``[n, L]``."""
    weight = entropy_weight(entropy, coef, 1.0) if entropy_aware else torch.full_like(entropy, coef)
    return torch.where(advantages[:, None] > 0, weight, torch.ones_like(weight))
