"""Several optimizer steps per rollout: PPO mini-batches (verl's ``ppo_mini_batch_size`` under
``data.train_batch_size``, EasyR1's ``actor.global_batch_size`` under ``rollout_batch_size``).

A window's kept groups are split into ``mini_batches`` shares, one optimizer step each; each share
is a list of pieces, one per rollout of the window, that hold the rollout's rows in that share and
share its advantages, mask and old / reference log-probs.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from zoo.grpo.window import WindowBatch, batch_divisors


def group_shares(part: WindowBatch, count: int) -> list[Tensor]:
    """The kept rows of ``part`` in ``count`` shares of whole groups, in order, as even as possible
    (the first shares take one group more), ``[n_j]`` each; a share may be empty."""
    size = part.rollout.num_generations
    groups = torch.unique_consecutive(part.rows // size)  # [g], rows are sorted
    return [part.rows[torch.isin(part.rows // size, share)] for share in torch.tensor_split(groups, count)]


def mini_batches(parts: list[WindowBatch], count: int) -> list[list[WindowBatch]]:
    """The window's ``count`` mini-batches: mini-batch ``j`` holds share ``j`` of every part's kept
    groups (`group_shares`), so on several ranks it is the union of each rank's share ``j``.

    Args:
        parts: The window's rollouts with their kept rows, advantages and masks.
        count: Mini-batches (optimizer steps per pass over the rollout).

    Returns:
        ``count`` lists of pieces (one per part, in the parts' order) that share the parts'
        tensors; with ``count`` 1 the parts themselves.
    """
    if count == 1:
        return [parts]
    shares = [group_shares(part, count) for part in parts]
    return [[replace(part, rows=rows[j]) for part, rows in zip(parts, shares, strict=True)] for j in range(count)]


def set_divisors(
    steps: list[list[WindowBatch]], counts: Tensor, loss_type, sizes: list[int], max_new_tokens: int, world_size: int
) -> None:
    """Each piece's divisor of its summed loss: every mini-batch is normalised as a window of its
    own (`zoo.grpo.window.batch_divisors`), from its pieces' kept rows and tokens over all ranks.

    Args:
        steps: The mini-batches' pieces, ``S`` lists of ``P``.
        counts: Kept rows and tokens of every piece over all ranks, in that order, ``[S * P, 2]``.
        loss_type: ``loss_type`` (a name or a `zoo.grpo.functional.Loss`).
        sizes: Rollouts of each batch of the window (more than one with dynamic sampling).
        max_new_tokens: Completion length limit (Dr. GRPO's constant).
        world_size: Ranks; gradients are averaged over them, so each divides by it too.
    """
    for step, step_counts in zip(steps, torch.split(counts, len(steps[0])), strict=True):
        divisors = batch_divisors(loss_type, step_counts, sizes, max_new_tokens)
        for piece, divisor in zip(step, divisors, strict=True):
            piece.divisor = divisor / world_size
