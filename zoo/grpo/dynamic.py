"""Sampling a batch, with DAPO dynamic sampling (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning
System at Scale"): refill the batch with more prompts until it holds as many groups with unequal rewards as it
has prompts, within a cap of refill rounds.

Every decision is taken on all-gathered counts, so every rank draws the same rounds; refill prompts come from the
data module's ``refill(key, round)``, a pure function of the batch key, the round and the position in the global
round (`datamodules.PretextDataModule.refill`), and sampling noise is keyed by each example's uid. So the kept
groups, and the update, are those of one process holding the global batch, and a resumed run draws the same.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace

import torch
from torch import Tensor

from zoo.grpo import functional as F
from zoo.grpo.window import Drawn

log = logging.getLogger(__name__)


def first_groups(unequal: list[Tensor], target: int) -> list[Tensor]:
    """The groups a dynamic batch keeps: the first ``target`` with unequal rewards, in the order (round, rank,
    position), so the choice does not depend on how the global batch is split over ranks.

    Args:
        unequal: For each round, which groups of every rank have unequal rewards, ``[W, B]`` bool.
        target: Groups the batch should hold (its prompts over all ranks).

    Returns:
        The kept groups of each round, ``[W, B]`` bool.
    """
    flat = torch.cat([u.flatten() for u in unequal])  # [R * W * B]
    keep = flat & (flat.long().cumsum(0) <= target)
    return [k.view_as(u) for k, u in zip(torch.split(keep, [u.numel() for u in unequal]), unequal, strict=True)]


class SamplingMixin:
    """The sampling half of a GRPO step: a batch's rollout and rewards, and its refill rounds with
    ``refill_rounds`` (see `GRPOMixin` for the settings)."""

    def _draw(self, batch: list, means) -> list[Drawn]:
        """The batch's scored rollout, then (with dynamic sampling) those of its refill rounds, each holding
        which of its groups the training batch keeps."""
        drawn = [self._score(batch)]
        return self._refill(drawn, means) if self.refill_rounds else drawn

    def _score(self, examples: list) -> Drawn:
        start = time.perf_counter()
        rollout = self.lightning_module.sample(examples, self.guidance.sampled(self.num_generations),
                                               max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                               top_p=self.top_p, seed=self._sampling_seed())
        sampled = time.perf_counter()
        rewards = self._verify(rollout)
        return Drawn(rollout, rewards, _totals(rewards, len(examples)), sample_s=sampled - start)

    def _guided(self, drawn: Drawn, means) -> Drawn:
        """The batch's rollout as the guidance (a hybrid, `zoo.grpo.guidance`) extends it: G rows a prompt."""
        rollout, rewards = self.guidance.extend(self, drawn.rollout, drawn.rewards, means)
        return replace(drawn, rollout=rollout, rewards=rewards, totals=_totals(rewards, len(rollout.examples)))

    def _sampling_seed(self) -> int:
        """Seed of this step's sampling noise: the run's seed (`seed_everything`) and the global step, so
        it is the same on every rank and after a resume."""
        base = int(os.environ.get("PL_GLOBAL_SEED", 0))
        return base * 2**32 + self.lightning_module.trainer.global_step

    def _refill(self, drawn: list[Drawn], means) -> list[Drawn]:
        """Refill rounds until the global batch holds as many groups with unequal rewards as it has prompts, or
        ``refill_rounds`` were drawn; then mark the groups it keeps (`first_groups`)."""
        trainer = self.lightning_module.trainer
        key = trainer.global_step * self.accumulate_grad_batches + len(self._window)  # unique per batch
        unequal = [self._gather_unequal(drawn[0])]
        target = unequal[0].numel()
        while int(sum(u.sum() for u in unequal)) < target and len(drawn) <= self.refill_rounds:
            drawn.append(self._score(_refill_examples(trainer.datamodule, key, len(drawn))))
            unequal.append(self._gather_unequal(drawn[-1]))
        keep = first_groups(unequal, target)
        for d, k in zip(drawn, keep, strict=True):
            d.keep = k[self.global_rank]
        self._log_refill(means, len(drawn) - 1, sum(u.numel() for u in unequal), int(sum(k.sum() for k in keep)),
                         target)
        return drawn

    def _log_refill(self, means, rounds: int, drawn: int, kept: int, target: int) -> None:
        """``train/dynamic/{rounds,groups_drawn,groups_kept,cap_hit}`` (over all ranks); a warning the first
        time the cap leaves a batch short."""
        for name, value in (("rounds", rounds), ("groups_drawn", drawn), ("groups_kept", kept),
                            ("cap_hit", float(kept < target))):
            means.add(f"train/dynamic/{name}", value)
        if kept < target and not getattr(self, "_warned_cap", False):
            self._warned_cap = True
            log.warning("dynamic sampling: step %d holds %d of %d groups with unequal rewards after %d refill "
                        "rounds (refill_rounds); it trains on those, as does every step that hits the cap "
                        "(train/dynamic/cap_hit)", self.lightning_module.trainer.global_step, kept, target, rounds)

    def _gather_unequal(self, drawn: Drawn) -> Tensor:
        """Which groups of every rank have unequal rewards, ``[W, B]`` bool."""
        mine = (~F.zero_std_groups(drawn.totals)).long().to(self.root_device)  # [B]
        return self.all_gather(mine).reshape(self.world_size, -1).cpu().bool()


def _totals(rewards: list, prompts: int) -> Tensor:
    return torch.tensor([r.total for r in rewards]).view(prompts, -1)  # [B, G]


def _refill_examples(datamodule, key: int, round: int) -> list:
    if not hasattr(datamodule, "refill"):
        raise RuntimeError("refill_rounds > 0 (dynamic sampling) needs a data module with refill(key, round), "
                           "e.g. datamodules.PretextDataModule")
    return datamodule.refill(key, round)
