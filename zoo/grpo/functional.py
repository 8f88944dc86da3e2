"""GRPO math as pure tensor functions: advantages, clipped surrogates, KL estimators, loss aggregation.

Shapes: B prompts, G samples per prompt, N = B * G completions, L completion tokens.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "gspo", "gpg")
SCALES = ("group", "batch", "none")
KL_ESTIMATORS = ("k1", "k2", "k3")
SCHEDULES = ("constant", "linear", "cosine")
SEQUENCE_LEVEL = ("grpo", "gspo")  # mean over each sequence's tokens, then over sequences


def group_advantages(rewards: Tensor, scale: str = "group", eps: float = 1e-4) -> Tensor:
    """Advantage of each completion relative to the other samples of its prompt.

    Args:
        rewards: One scalar reward per completion, ``[B, G]``.
        scale: ``"group"`` divides by each group's std (GRPO), ``"batch"`` by the std of all rewards given,
            ``"none"`` only centres (Dr. GRPO).
        eps: Keeps a group whose rewards are all equal at zero advantage instead of NaN.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # [B, G]
    if scale == "group":
        return centred / (rewards.std(dim=1, keepdim=True) + eps)
    if scale == "batch":
        return centred / (rewards.std() + eps)
    return centred


def zero_std_groups(rewards: Tensor) -> Tensor:
    """Groups whose rewards are all equal (they carry no GRPO signal), ``[B]`` bool."""
    return (rewards == rewards[:, :1]).all(dim=1)


def importance_ratio(logps: Tensor, old_logps: Tensor, mask: Tensor, loss_type: str) -> Tensor:
    """pi / pi_old per token, ``[N, L]``; GSPO uses the length-normalised sequence ratio on every token."""
    log_ratio = logps - old_logps  # [N, L]
    if loss_type == "gspo":
        mask = mask.to(logps.dtype)
        seq = (log_ratio * mask).sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1)
        log_ratio = seq.expand_as(logps)  # [N, L]
    return log_ratio.exp()


def per_token_loss(
    logps: Tensor,
    old_logps: Tensor,
    advantages: Tensor,
    mask: Tensor,
    loss_type: str = "grpo",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Clipped policy-gradient surrogate per token (to be minimised) and where clipping was active.

    Args:
        logps: Current log-probs of the sampled tokens, ``[N, L]``.
        old_logps: Log-probs under the sampling policy, ``[N, L]`` (``logps.detach()`` when on-policy).
        advantages: ``[N]``.
        mask: Tokens that count, ``[N, L]``.
        loss_type: One of `LOSS_TYPES`; ``gpg`` is the unclipped REINFORCE-style ``-A * logp``.
        epsilon: Lower clip range: the ratio is clipped at ``1 - epsilon``.
        epsilon_high: Upper clip range (DAPO clip-higher); defaults to ``epsilon``.

    Returns:
        ``loss`` ``[N, L]`` and ``clipped`` ``[N, L]`` (bool).
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    adv = advantages[:, None]  # [N, 1]
    if loss_type == "gpg":
        return -adv * logps, torch.zeros_like(logps, dtype=torch.bool)
    high = epsilon if epsilon_high is None else epsilon_high
    ratio = importance_ratio(logps, old_logps, mask, loss_type)  # [N, L]
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - epsilon, 1 + high) * adv
    was_clipped = (clipped < unclipped) & mask.bool()
    return -torch.minimum(unclipped, clipped), was_clipped


def kl_penalty(logps: Tensor, ref_logps: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi (Schulman's k1/k2/k3), ``[N, L]``."""
    log_r = ref_logps - logps  # log(pi_ref / pi)
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r**2
    if estimator == "k3":
        return log_r.exp() - log_r - 1
    raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")


def aggregate(values: Tensor, mask: Tensor, loss_type: str, normaliser: float) -> Tensor:
    """Reduce per-token values to the loss of these rows.

    Sequence-level types (``grpo``, ``gspo``) average each row over its tokens and sum rows; the others sum
    tokens. Either sum is divided by ``normaliser`` (see `loss_normaliser`), so micro-batches of one batch
    add up to the loss of the whole batch.
    """
    mask = mask.to(values.dtype)
    if loss_type in SEQUENCE_LEVEL:
        per_row = (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # [N]
        return per_row.sum() / normaliser
    return (values * mask).sum() / normaliser


def loss_normaliser(loss_type: str, rows: int, tokens: float, global_tokens_per_rank: float,
                    max_new_tokens: int) -> float:
    """The divisor of `aggregate` for a batch of ``rows`` completions holding ``tokens`` counted tokens.

    ``grpo``/``gspo``: rows (mean of sequence means). ``dr_grpo``: rows * max_new_tokens (a constant, so long
    and short answers weigh per token alike). ``bnpo``: this rank's tokens. ``dapo``/``gpg``: the token mean
    over all ranks (``global_tokens_per_rank`` = all tokens / world size, as DDP averages gradients).
    """
    if loss_type in SEQUENCE_LEVEL:
        value = rows
    elif loss_type == "dr_grpo":
        value = rows * max_new_tokens
    elif loss_type == "bnpo":
        value = tokens
    else:
        value = global_tokens_per_rank
    return max(float(value), 1.0)


def scheduled(value: float, schedule: str, progress: float) -> float:
    """``value`` decayed to zero over training: ``progress`` runs from 0 (start) to 1 (end)."""
    progress = min(max(progress, 0.0), 1.0)
    if schedule == "constant":
        return value
    if schedule == "linear":
        return value * (1.0 - progress)
    if schedule == "cosine":
        return value * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
