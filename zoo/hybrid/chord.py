"""CHORD (Zhang et al. 2025, "On-Policy RL Meets Off-Policy Experts: Harmonizing Supervised
Fine-Tuning and Reinforcement Learning via Dynamic Weighting", arXiv 2508.11408; code: modelscope
Trinity-RFT, ``mix_chord``): an SFT loss on expert demonstrations added to the GRPO loss with a
global weight mu that moves from imitation to exploration, ``(1 - mu) * L_GRPO + mu * L_SFT``.

The demonstrations never join the groups: advantages are those of the sampled completions alone.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from zoo import data
from zoo.grpo.guidance import Guidance
from zoo.grpo.window import last_chunk
from zoo.hybrid.supervised import sft_passes
from zoo.sft.demonstrations import teacher_forced


def chord_mu(step: int, peak: float, valley: float, warmup_steps: int, decay_steps: int) -> float:
    """CHORD's global SFT weight at optimizer step ``step``: linear from 0 to ``peak`` over
    ``warmup_steps``, then a cosine from ``peak`` down to ``valley`` over ``decay_steps``, then
    ``valley``."""
    if step < warmup_steps:
        return step / warmup_steps * peak
    if step >= warmup_steps + decay_steps:
        return valley
    cosine = 0.5 * (1.0 + math.cos(math.pi * (step - warmup_steps) / decay_steps))
    return (peak - valley) * cosine + valley


def phi_weights(logps: Tensor) -> Tensor:
    """CHORD-phi's token weight ``p * (1 - p)`` of each demonstration token's probability ``p``,
    without gradient: tokens the policy already predicts (p near 1) or finds implausible (p near 0)
    weigh little, ``[n, L]``."""
    probs = logps.detach().exp()
    return probs * (1.0 - probs)


class CHORD(Guidance):
    """CHORD's dynamically weighted SFT inside GRPO: every optimizer step adds ``mu`` times the SFT
    loss of the batch's demonstrations (the data module's ``demonstration(example)``, one per
    prompt, teacher-forced at temperature 1) to ``1 - mu`` times the GRPO surrogate of the sampled
    completions.

    ``mu`` follows `chord_mu` over the optimizer steps (``decay_steps`` None: the rest of the run,
    ``max_steps``). The SFT loss is the token mean of ``-log pi`` over every demonstration token of
    the optimizer step (every accumulated batch and rank), each token weighted by ``p * (1 - p)``
    with ``token_weights`` (CHORD-phi) or by 1 (CHORD-mu). The demonstrations are not rows of the
    groups, so they change no reward, advantage or normaliser of the GRPO term; the KL and entropy
    terms (``beta``, ``entropy_coef``) are added to the sampled rows unscaled. Logged:
    ``train/hybrid/mu`` and ``train/hybrid/sft_loss`` (unweighted token-mean NLL).

    Where zoo differs from Trinity-RFT's ``mix_chord``: the demonstrations are those of the batch's
    own prompts (Trinity draws a separate expert batch), and they are scored at temperature 1.

    Args:
        mu_peak: mu after the warm-up.
        mu_valley: mu at the end of the decay, and after it.
        warmup_steps: Optimizer steps over which mu rises linearly from 0 to ``mu_peak``.
        decay_steps: Optimizer steps of the cosine decay from ``mu_peak`` to ``mu_valley``; None
            decays over the rest of the run (``max_steps``).
        token_weights: Weight each demonstration token by ``p * (1 - p)`` (CHORD-phi); False
            weighs every token alike (CHORD-mu).
    """

    def __init__(
        self,
        mu_peak: float = 0.5,
        mu_valley: float = 0.02,
        warmup_steps: int = 0,
        decay_steps: int | None = None,
        token_weights: bool = True,
    ):
        if not (0 <= mu_valley <= 1 and 0 <= mu_peak <= 1):
            raise ValueError(f"mu_peak and mu_valley must be in [0, 1], got {mu_peak}, {mu_valley}")
        if warmup_steps < 0 or (decay_steps is not None and decay_steps < 0):
            raise ValueError(f"warmup_steps and decay_steps must be >= 0, got {warmup_steps}, {decay_steps}")
        self.mu_peak = mu_peak
        self.mu_valley = mu_valley
        self.warmup_steps = warmup_steps
        self.decay_steps = decay_steps
        self.token_weights = token_weights
        self._mu = 0.0
        self._logged: dict[str, tuple[float, float]] = {}

    def attach(self, strategy) -> None:
        if strategy.num_iterations > 1:
            raise ValueError(
                "CHORD adds its SFT term to one optimizer step per rollout; use num_iterations 1 with CHORD"
            )

    def data_needs(self) -> list[data.Need]:
        return [data.DEMONSTRATIONS]

    def mu(self, strategy) -> float:
        """mu at the strategy's current optimizer step."""
        trainer = strategy.lightning_module.trainer
        decay = self.decay_steps
        if decay is None:
            decay = max((trainer.max_steps or 0) - self.warmup_steps, 0)
        return chord_mu(trainer.global_step, self.mu_peak, self.mu_valley, self.warmup_steps, decay)

    def prepare(self, strategy, parts: list) -> None:
        """The SFT term's backward passes, accumulated into the gradients of the coming GRPO passes
        (synchronised by the window's last pass, or by the last SFT pass when GRPO has none)."""
        self._mu = self.mu(strategy)
        module = strategy.lightning_module
        examples = [example for part in parts for example in part.rollout.examples]
        replies = [module.trainer.datamodule.demonstration(example) for example in examples]
        rollout, _ = teacher_forced(module, examples, replies, strategy.max_new_tokens)
        syncs = last_chunk(parts) is None  # no GRPO pass follows: the last SFT pass synchronises
        weights = phi_weights if self.token_weights else None
        _, nll = sft_passes(strategy, rollout, self._mu, weights, syncs)
        tokens = float(rollout.completion_mask.sum())
        self._logged = {"train/hybrid/sft_loss": (float(nll) / max(tokens, 1.0), tokens)}

    def adjust(self, strategy, part, rows: Tensor, out: dict, per_token: Tensor, means) -> tuple[Tensor, Tensor]:
        if means is not None:
            means.add("train/hybrid/mu", self._mu)
            for name, (value, weight) in self._logged.items():
                if weight:
                    means.add(name, value, weight)
            self._logged = {}
        return per_token * (1.0 - self._mu), torch.zeros((), device=per_token.device)
