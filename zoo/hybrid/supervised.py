"""The SFT passes a hybrid adds to a GRPO step (`zoo.hybrid.Entropulse`'s SFT phases,
`zoo.hybrid.CHORD`'s weighted term): the token-mean NLL of a teacher-forced rollout over every
rank's tokens, backward in the strategy's micro-batches (`zoo.training.ManualStep`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from zoo.sft.functional import sft_loss, token_nll


def sft_passes(
    strategy,
    rollout,
    scale: float = 1.0,
    token_weights: Callable[[Tensor], Tensor] | None = None,
    syncs: bool = True,
) -> tuple[Tensor, Tensor]:
    """Backward passes of ``scale`` times the SFT loss of ``rollout``'s completions (the token mean
    over every rank), each token weighted by ``token_weights(logps)`` (None: 1); the last pass
    synchronises the gradients when ``syncs``. Returns this rank's share of the unscaled loss and
    the sum of its tokens' unweighted NLL."""
    mask = rollout.completion_mask  # [B, L]
    count = strategy.reduce(mask.sum().float().to(strategy.root_device), reduce_op="sum")
    divisor = max(float(count), 1.0) / strategy.world_size
    (plan,) = strategy.plan([torch.arange(rollout.size)], [rollout])
    loss_share = torch.zeros((), device=strategy.root_device)
    nll = torch.zeros((), device=strategy.root_device)
    for i, (chunk, live) in enumerate(plan):
        out = strategy.forward(rollout, chunk)
        logps, m = out["logps"], mask[chunk].to(out["logps"].device)  # [n, L]
        weights = None if token_weights is None else token_weights(logps)
        loss = sft_loss(logps, m, "token", divisor=divisor, weights=weights)
        strategy.backward_pass(loss * scale * live, last=syncs and i == len(plan) - 1)
        loss_share += loss.detach() * live
        nll += token_nll(logps.detach(), m).sum() * live
    return loss_share, nll
