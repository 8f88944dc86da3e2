"""Token log-probs and entropy of sampled completions, from the policy's logits: pure tensor math.

Shapes: n completion rows, L completion tokens, V vocabulary rows.
"""

from __future__ import annotations

import torch
from torch import Tensor


def token_log_probs(
    logits: Tensor, ids: Tensor, temperature: float = 1.0, banned: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The log-prob of each sampled token and the entropy of the distribution it was sampled from.

    Args:
        logits: Next-token logits at the completion positions, ``[n, L, V]`` (any float dtype;
            computed in float32).
        ids: The sampled tokens, ``[n, L]``.
        temperature: The sampling temperature: logits are divided by it, so the distribution scored
            is the one that was sampled.
        banned: Tokens sampling suppressed, ``[V]`` bool; they get probability 0 here too. None bans
            nothing.

    Returns:
        ``(logps, entropy)``, both ``[n, L]``.
    """
    logits = logits.float() / temperature  # [n, L, V]
    if banned is not None:
        logits = logits.masked_fill(banned, torch.finfo(logits.dtype).min)
    log_z = logits.logsumexp(dim=-1)  # [n, L]
    logps = logits.gather(-1, ids[..., None]).squeeze(-1) - log_z  # [n, L]
    entropy = log_z - (logits.softmax(dim=-1) * logits).sum(dim=-1)  # [n, L]
    return logps, entropy
