"""Sampling a batch, with DAPO dynamic sampling (Yu et al. 2025, "DAPO: An Open-Source LLM
Reinforcement Learning System at Scale"): refill the batch with more prompts until it holds as many
groups with unequal rewards as it has prompts, within a cap of refill rounds.

Every decision is taken on all-gathered counts, so every rank draws the same rounds; refill prompts
come from the data module's ``refill(key, round)``, a pure function of the batch key, the round and
the position in the global round (`datamodules.PretextDataModule.refill`), and sampling noise is
keyed by each example's uid. So the kept groups, and the update, are those of one process holding
the global batch, and a resumed run draws the same.
"""

from __future__ import annotations

import logging
import os
import time

import torch
from torch import Tensor

from zoo.data import verify
from zoo.grpo import functional as F
from zoo.grpo.window import ScoredRollout
from zoo.rollout.turns import sample_batch

log = logging.getLogger(__name__)


def first_groups(unequal: list[Tensor], target: int) -> list[Tensor]:
    """The groups a dynamic batch keeps: the first ``target`` with unequal rewards, in the order
    (round, rank, position), so the choice does not depend on how the global batch is split over
    ranks.

    Args:
        unequal: For each round, which groups of every rank have unequal rewards, ``[W, B]`` bool.
        target: Groups the batch should hold (its prompts over all ranks).

    Returns:
        The kept groups of each round, ``[W, B]`` bool.
    """
    flat = torch.cat([u.flatten() for u in unequal])  # [R * W * B]
    keep = flat & (flat.long().cumsum(0) <= target)
    return [k.view_as(u) for k, u in zip(torch.split(keep, [u.numel() for u in unequal]), unequal, strict=True)]


def draw(strategy, batch: list, key: int, means) -> list[ScoredRollout]:
    """The batch's scored rollout, then (with ``refill_rounds``) those of its refill rounds, each
    holding which of its groups the training batch keeps.

    Args:
        strategy: The GRPO strategy (its sampling settings, its ranks).
        batch: The batch's examples.
        key: The batch's number in the run (refill prompts are a function of it).
        means: Takes the ``train/dynamic/*`` metrics.
    """
    drawn = [score(strategy, batch)]
    if not strategy.refill_rounds:
        return drawn
    return refill(strategy, drawn, key, means)


def score(strategy, examples: list) -> ScoredRollout:
    """``examples`` sampled with the strategy's settings (G of each, seeded by the run and the step)
    and verified."""
    module = strategy.lightning_module
    start = time.perf_counter()
    rollout = sample_batch(
        module,
        module.trainer.datamodule,
        examples,
        strategy.guidance.sampled(strategy.num_generations),
        any_rank=strategy.any_rank,
        max_new_tokens=strategy.max_new_tokens,
        temperature=strategy.temperature,
        top_p=strategy.top_p,
        seed=sampling_seed(module.trainer.global_step),
    )
    sampled = time.perf_counter()
    rewards = verify(module.trainer.datamodule, rollout)
    return ScoredRollout(rollout, rewards, totals(rewards, len(examples)), sample_s=sampled - start)


def sampling_seed(step: int) -> int:
    """Seed of a step's sampling noise: the run's seed (`seed_everything`) and the global step, so
    it is the same on every rank and after a resume."""
    base = int(os.environ.get("PL_GLOBAL_SEED", 0))
    return base * 2**32 + step


def refill(strategy, drawn: list[ScoredRollout], key: int, means) -> list[ScoredRollout]:
    """Refill rounds until the global batch holds as many groups with unequal rewards as it has
    prompts, or ``refill_rounds`` were drawn; then mark the groups it keeps (`first_groups`)."""
    datamodule = strategy.lightning_module.trainer.datamodule
    unequal = [gather_unequal(strategy, drawn[0])]
    target = unequal[0].numel()
    while int(sum(u.sum() for u in unequal)) < target and len(drawn) <= strategy.refill_rounds:
        drawn.append(score(strategy, datamodule.refill(key, len(drawn))))
        unequal.append(gather_unequal(strategy, drawn[-1]))
    keep = first_groups(unequal, target)
    for d, k in zip(drawn, keep, strict=True):
        d.keep = k[strategy.global_rank]
    rounds = len(drawn) - 1
    kept = int(sum(k.sum() for k in keep))
    log_refill(means, rounds, sum(u.numel() for u in unequal), kept, target)
    if kept < target and not _warned_cap:
        _warn_cap(strategy.lightning_module.trainer.global_step, kept, target, rounds)
    return drawn


def log_refill(means, rounds: int, drawn: int, kept: int, target: int) -> None:
    """``train/dynamic/{rounds,groups_drawn,groups_kept,cap_hit}`` (over all ranks)."""
    means.add("train/dynamic/rounds", rounds)
    means.add("train/dynamic/groups_drawn", drawn)
    means.add("train/dynamic/groups_kept", kept)
    means.add("train/dynamic/cap_hit", float(kept < target))


_warned_cap = False


def _warn_cap(step: int, kept: int, target: int, rounds: int) -> None:
    """Warn once per process that a batch hit the cap of refill rounds."""
    global _warned_cap
    _warned_cap = True
    log.warning(
        "dynamic sampling: step %d holds %d of %d groups with unequal rewards after %d refill rounds "
        "(refill_rounds); it trains on those, as does every step that hits the cap "
        "(train/dynamic/cap_hit)",
        step,
        kept,
        target,
        rounds,
    )


def gather_unequal(strategy, drawn: ScoredRollout) -> Tensor:
    """Which groups of every rank have unequal rewards, ``[W, B]`` bool."""
    mine = (~F.zero_std_groups(drawn.totals)).long().to(strategy.root_device)  # [B]
    return strategy.all_gather(mine).reshape(strategy.world_size, -1).cpu().bool()


def totals(rewards: list, prompts: int) -> Tensor:
    return torch.tensor([r.total for r in rewards]).view(prompts, -1)  # [B, G]
