"""The batches of one optimizer step (a gradient accumulation window) as GRPO trains on them: each
batch's kept rows, loss mask, advantages, micro-batch plan and the divisor of its summed loss.

The strategy scores every batch of a window before it trains on any, so the window's update is the
update of one batch holding all its groups: ``scale_rewards: batch`` takes the std over the window
and the normalisers count the window's rows and tokens over every rank
(`zoo.grpo.functional.window_normalisers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from zoo.grpo import functional as F
from zoo.rollout.rollout import Rollout
from zoo.rollout.turns import MultiTurnRollout


@dataclass
class ScoredRollout:
    """One scored rollout of a batch: the batch's own, or a refill round's (dynamic sampling).

    Attributes:
        rollout: B prompts, G samples each.
        rewards: The N rewards.
        totals: Their totals ``[B, G]``.
        keep: Groups that belong to the training batch ``[B]`` bool; None: all of them.
        sample_s: Seconds spent sampling.
    """

    rollout: Rollout
    rewards: list
    totals: Tensor
    keep: Tensor | None = None
    sample_s: float = 0.0

    @property
    def members(self) -> Tensor:
        """``keep``, or every group, ``[B]`` bool."""
        return torch.ones(len(self.totals), dtype=torch.bool) if self.keep is None else self.keep

    @property
    def tokens(self) -> float:
        """Prompt tokens (once per sample) and completion tokens."""
        prompt = self.rollout.prompts.tensors["attention_mask"].sum() * self.rollout.num_generations
        return float(prompt + self.rollout.completion_mask.sum())


@dataclass
class WindowBatch:
    """One batch of a window.

    Attributes:
        rollout: Its rollout (B prompts, G samples each).
        advantages: ``[N]``.
        mask: Tokens that count in the loss, ``[N, L]`` bool.
        rows: The rows that enter the loss, ``[n]`` (all of them unless ``filter_zero_variance``).
        plan: Micro-batches of ``rows`` and their weights (`plan_micro_batches`).
        divisor: This rank's divisor of the batch's summed loss.
        old: Log-probs of the sampling policy ``[N, L]`` (None when on-policy).
        ref: Log-probs of the reference policy ``[N, L]`` (None without a KL term).
    """

    rollout: Rollout
    advantages: Tensor
    mask: Tensor
    rows: Tensor
    plan: list = field(default_factory=list)
    divisor: float = 1.0
    old: Tensor | None = None
    ref: Tensor | None = None

    @property
    def counts(self) -> list[float]:
        """Kept rows and their counted tokens."""
        return [float(len(self.rows)), float(self.mask[self.rows].sum())]


def window_batch(
    drawn: ScoredRollout, advantages: Tensor, filter_zero_variance: bool, mask_truncated: bool
) -> WindowBatch:
    """A rollout's kept rows (those of its groups in the batch, minus groups with equal rewards when
    filtering) and loss mask (completions without an EOS left out with ``mask_truncated``)."""
    rollout, keep = drawn.rollout, drawn.members  # [B]
    if filter_zero_variance:
        keep = keep & ~F.zero_std_groups(drawn.totals)
    rows = torch.nonzero(keep.repeat_interleave(rollout.num_generations)).flatten()  # [n]
    mask = rollout.completion_mask.clone()  # [N, L]
    if mask_truncated:
        mask[rollout.truncated] = False
    return WindowBatch(rollout, advantages, mask, rows)


def window_advantages(
    totals: list[Tensor], scale: str, everyone: Tensor | None = None, offset: int = 0, members: Tensor | None = None
) -> list[Tensor]:
    """``[N]`` advantages of each rollout of a window from its ``[B, G]`` rewards.

    Args:
        totals: Rewards of each rollout of this rank.
        scale: ``scale_rewards``.
        everyone: For ``batch`` and ``gpg`` scaling, the rewards of every rollout of every rank,
            ``[W * sum(B), G]``: the std (``batch``) or GPG's alpha (``gpg``) is taken over those of
            ``members``.
        offset: Where this rank's rows start in ``everyone``.
        members: Groups of ``everyone`` in the training batch ``[W * sum(B)]`` bool (None: all); the
            others (left out by dynamic sampling) get advantage 0.
    """
    if scale not in F.GLOBAL_SCALES:
        return [F.group_advantages(t, scale).flatten() for t in totals]
    members = torch.ones(len(everyone), dtype=torch.bool) if members is None else members
    advantages = torch.zeros_like(everyone)  # [W * sum(B), G]
    advantages[members] = F.group_advantages(everyone[members], scale)
    mine = advantages[offset : offset + sum(len(t) for t in totals)]  # [sum(B), G]
    return [a.flatten() for a in torch.split(mine, [len(t) for t in totals])]


def batch_divisors(loss_type: str, counts: Tensor, sizes: list[int], max_new_tokens: int) -> list[float]:
    """The divisor of each rollout's summed loss, from the kept rows and tokens of every rollout
    over all ranks ``[P, 2]``; the window's batches hold ``sizes`` consecutive rollouts each (more
    than one with dynamic sampling), and each batch counts as one in
    `zoo.grpo.functional.window_normalisers`."""
    per_batch = torch.stack([c.sum(dim=0) for c in torch.split(counts, sizes)])  # [k, 2]
    divisors = F.window_normalisers(loss_type, per_batch, max_new_tokens)
    return [divisor for divisor, size in zip(divisors, sizes, strict=True) for _ in range(size)]


@torch.no_grad()
def no_grad_log_probs(module, rollout: Rollout, plan: list, reference: bool) -> Tensor | None:
    """Log-probs ``[N, L]`` of the rows of ``plan`` under the policy (the old log-probs of
    ``num_iterations`` or ``mini_batches > 1``) or its frozen reference (``reference``), in the
    log-probs' own dtype; rows outside the plan are 0."""
    out = None
    for chunk, _ in plan:
        logps = (
            module.reference_log_probs(rollout, chunk)
            if reference
            else module.token_log_probs(rollout, chunk, entropy=False)[0]
        )
        if out is None:
            out = torch.zeros(rollout.completion_ids.shape, dtype=logps.dtype, device=logps.device)
        out[chunk] = logps
    return out


def last_chunk(parts: list[WindowBatch]) -> tuple[int, int] | None:
    """``(part, chunk)`` of the window's last backward pass (the one that synchronises gradients),
    None when no part has a chunk (the same on every rank, as the plans are)."""
    for p in reversed(range(len(parts))):
        if parts[p].plan:
            return p, len(parts[p].plan) - 1
    return None


def add_window_metrics(means, parts: list[WindowBatch], totals: list[Tensor]) -> None:
    """``train/grpo/{adv_std,frac_zero_std,completion_len,truncated}`` of the window's batches, and
    with multi-turn rollouts (tool tasks) ``train/tools/{calls,invalid,turns}``: tool calls per row,
    the fraction of rows that ended on an invalid action, and turns per row."""
    means.add("train/grpo/adv_std", torch.cat([part.advantages for part in parts]).std().item())
    means.add("train/grpo/frac_zero_std", F.zero_std_groups(torch.cat(totals)).float().mean().item())
    for name, values in (
        ("completion_len", [p.rollout.completion_mask.sum(1) for p in parts]),
        ("truncated", [p.rollout.truncated for p in parts]),
    ):
        means.add(f"train/grpo/{name}", torch.cat(values).float().mean().item())
    rollouts = [p.rollout for p in parts if isinstance(p.rollout, MultiTurnRollout)]
    if rollouts:  # tool tasks: what the rows did between their turns
        for name, values in (
            ("calls", [r.calls for r in rollouts]),
            ("invalid", [r.invalid for r in rollouts]),
            ("turns", [r.turns_taken() for r in rollouts]),
        ):
            means.add(f"train/tools/{name}", torch.cat([v.cpu() for v in values]).float().mean().item())
