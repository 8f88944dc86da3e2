"""GRPO-CARE's consistency bonus (Chen et al. 2025, "GRPO-CARE: Consistency-Aware Reinforcement
Learning for Multimodal Reasoning", arXiv 2506.16141; TencentARC/GRPO-CARE): instead of a KL penalty
to the initial weights, a slowly moving (EMA) copy of the policy scores each right completion, and
the right completions it finds more likely than their right peers earn a bonus on their reward.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch import Tensor

from zoo.devices import FSDP2
from zoo.grpo.guidance import Guidance


def consistency_bonus(likelihood: Tensor, right: Tensor, coef: float) -> Tensor:
    """Each completion's bonus, ``[B, G]``: ``coef * min(1, p / mean_right(p))`` for a right one,
    ``p`` its likelihood under the EMA reference and the mean taken over the right completions of
    its group; 0 for the others.

    Args:
        likelihood: ``p`` of every completion, ``[B, G]``, in (0, 1].
        right: Which completions are right, ``[B, G]`` bool.
        coef: The largest bonus.
    """
    count = right.sum(dim=1, keepdim=True).clamp(min=1)  # [B, 1]
    mean = (likelihood * right).sum(dim=1, keepdim=True) / count  # [B, 1]
    ratio = (likelihood / mean.clamp(min=1e-12)).clamp(max=1.0)
    return torch.where(right, coef * ratio, torch.zeros_like(likelihood))


@torch.no_grad()
def ema_update(ema: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    """``ema <- decay * ema + (1 - decay) * model``, parameter by parameter."""
    for slow, fast in zip(ema.parameters(), model.parameters(), strict=True):
        slow.mul_(decay).add_(fast.detach().to(slow.dtype), alpha=1.0 - decay)


class CARE(Guidance):
    """GRPO-CARE's consistency-aware reward, as a GRPO ``guidance``: before advantages are computed,
    each completion whose ``accuracy`` part is 1 earns ``+ coef * min(1, p / mean p)`` on its
    reward, ``p`` the likelihood the EMA reference gives the completion and the mean over the right
    completions of its group: a right answer that a slow copy of the policy finds as likely as its
    right peers earns the full bonus, a right answer reached by an unlikely path less.

    The reference starts as the policy's weights at the first step and follows them as an
    exponential moving average, ``ema <- decay * ema + (1 - decay) * policy``, once per training
    step. GRPO-CARE replaces the KL term with this bonus, so ``beta`` must be 0. Logged:
    ``train/care/bonus`` (mean bonus over completions) and ``train/care/likelihood`` (mean ``p`` of
    the right ones).

    Where zoo differs from the paper: GRPO-CARE scores the likelihood of the *answer* given the
    question and the completion's reasoning; zoo scores ``p`` as the geometric mean token
    probability of the whole completion (reasoning and answer) under the EMA reference, and pays the
    bonus in the ``min(1, p / mean)`` form above (the paper's own calibration is not reproduced).
    The EMA copy is a full second model on each rank (not with FSDP2 or LoRA) and is not
    checkpointed: a resumed run restarts it from the resumed weights.

    Args:
        coef: The largest bonus, added to the reward of a right completion.
        decay: EMA decay per training step (0.995 follows the policy over about 200 steps).
    """

    def __init__(self, coef: float = 0.5, decay: float = 0.995):
        if coef < 0 or not 0 <= decay < 1:
            raise ValueError(f"need coef >= 0 and decay in [0, 1), got {coef}, {decay}")
        self.coef = coef
        self.decay = decay
        self._ema: torch.nn.Module | None = None

    def attach(self, strategy) -> None:
        if strategy.beta > 0:
            raise ValueError("GRPO-CARE replaces the KL penalty with its consistency bonus: set beta 0 with CARE")
        if isinstance(strategy, FSDP2):
            raise ValueError("CARE keeps a full EMA copy of the model on each rank; use one device or DDP")

    def extend(self, strategy, rollout, rewards: list, means) -> tuple:
        module = strategy.lightning_module
        if getattr(module, "lora", None) is not None:
            raise ValueError("CARE needs full weights to average; it does not combine with lora")
        if self._ema is None:
            self._ema = copy.deepcopy(module.model).eval().requires_grad_(False)
        else:
            ema_update(self._ema, module.model, self.decay)
        b, g = len(rollout.examples), rollout.num_generations
        likelihood = self._likelihood(strategy, rollout).view(b, g)  # [B, G]
        right = torch.tensor([r.parts.get("accuracy", 0.0) >= 1.0 for r in rewards]).view(b, g)
        bonus = consistency_bonus(likelihood, right, self.coef).flatten()  # [N]
        means.add("train/care/bonus", float(bonus.mean()), len(bonus))
        if right.any():
            means.add("train/care/likelihood", float(likelihood[right].mean()), float(right.sum()))
        paid = [
            replace(r, total=r.total + float(x), parts={**r.parts, "care_bonus": float(x)})
            for r, x in zip(rewards, bonus, strict=True)
        ]
        return rollout, paid

    def _likelihood(self, strategy, rollout) -> Tensor:
        """Geometric mean token probability of each completion under the EMA reference, ``[N]``."""
        module = strategy.lightning_module
        mask = rollout.completion_mask  # [N, L]
        out = torch.zeros(rollout.size, dtype=torch.float64)
        (plan,) = strategy.plan([torch.arange(rollout.size)])
        with torch.no_grad():
            for chunk, live in plan:
                logps = (
                    module.token_log_probs(rollout, chunk, model=self._ema, entropy=False)[0].double().cpu()
                )  # [n, L]
                m = mask[chunk].cpu().to(logps.dtype)
                if live:
                    out[chunk] = ((logps * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)).exp()
        return out.float()
