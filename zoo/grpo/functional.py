"""GRPO math as pure tensor functions: advantages, the registered loss types, KL estimators,
normalisers.

Shapes: B prompts, G samples per prompt, N = B * G completions, L completion tokens.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

SCALES = ("group", "batch", "none", "gpg")
#: Scalings that read the rewards of the whole window on every rank, not one group alone.
GLOBAL_SCALES = ("batch", "gpg")
#: GPG caps its correction at 1 / 0.05 (``max(1 - M / B, 0.05)`` in its trainer).
GPG_FLOOR = 0.05
KL_ESTIMATORS = ("k1", "k2", "k3")
SCHEDULES = ("constant", "linear", "cosine")


@dataclass(frozen=True)
class LossType:
    """A loss type: its per-token surrogate and how per-token values become the loss of an optimizer
    step.

    Attributes:
        name: The ``loss_type`` setting that selects it.
        per_token: ``(logps, old_logps, advantages, mask, epsilon, epsilon_high) -> (loss,
            clipped)``, the ``[N, L]`` surrogate to minimise and where clipping was active.
        normaliser: ``(rows, tokens, max_new_tokens) -> divisor`` of the summed loss, from the
            counts of the kept rows and their counted tokens over all ranks.
        sequence_mean: Average each row over its tokens before rows are summed.
        per_batch: Normalise each batch by its own counts, then average the batches of an
            accumulation window; otherwise the whole window is normalised by its counts as one
            batch.
        off_policy: Has an importance ratio, so samples stay usable after an update
            (``num_iterations`` or ``mini_batches > 1``).
    """

    name: str
    per_token: Callable[..., tuple[Tensor, Tensor]]
    normaliser: Callable[[float, float, int], float]
    sequence_mean: bool = False
    per_batch: bool = False
    off_policy: bool = True


#: Every loss type, by name; `register_loss` fills it and ``loss_type`` settings are checked against
#: it.
LOSSES: dict[str, LossType] = {}


def register_loss(
    name: str,
    normaliser: Callable[[float, float, int], float],
    *,
    sequence_mean: bool = False,
    per_batch: bool = False,
    off_policy: bool = True,
):
    """Decorator: register a per-token surrogate as loss type ``name`` (see `LossType` for the
    arguments)."""

    def add(per_token):
        if name in LOSSES:
            raise ValueError(f"loss type {name!r} is already registered")
        LOSSES[name] = LossType(name, per_token, normaliser, sequence_mean, per_batch, off_policy)
        return per_token

    return add


def by_rows(rows: float, tokens: float, max_new_tokens: int) -> float:
    """Mean over rows (of each row's token mean, with ``sequence_mean``)."""
    return rows


def by_tokens(rows: float, tokens: float, max_new_tokens: int) -> float:
    """Mean over tokens."""
    return tokens


def by_max_tokens(rows: float, tokens: float, max_new_tokens: int) -> float:
    """A constant per row (Dr. GRPO): long and short answers weigh alike per token."""
    return rows * max_new_tokens


def group_advantages(rewards: Tensor, scale: str = "group", eps: float = 1e-4) -> Tensor:
    """Advantage of each completion relative to the other samples of its prompt.

    Args:
        rewards: One scalar reward per completion, ``[B, G]``.
        scale: ``"group"`` divides by each group's std (GRPO), ``"batch"`` by the std of all rewards
            given, ``"none"`` only centres (Dr. GRPO), ``"gpg"`` centres and multiplies by
            `gpg_alpha` of the groups given (GPG).
        eps: Keeps a group whose rewards are all equal at zero advantage instead of NaN.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # [B, G]
    if scale == "group":
        return centred / (rewards.std(dim=1, keepdim=True) + eps)
    if scale == "batch":
        return centred / (rewards.std() + eps)
    if scale == "gpg":
        return centred * gpg_alpha(rewards)
    return centred


def gpg_alpha(rewards: Tensor) -> float:
    """GPG's gradient correction ``alpha = B / (B - M)`` for ``[B, G]`` rewards, M the groups whose
    rewards are all equal (they add zero gradient, so the rest are scaled up to the gradient of B
    groups); at most ``1 / GPG_FLOOR`` (GPG divides the loss by ``max(1 - M / B, 0.05)``)."""
    b = len(rewards)
    m = int(zero_std_groups(rewards).sum())
    return 1.0 / max(1.0 - m / max(b, 1), GPG_FLOOR)


def zero_std_groups(rewards: Tensor) -> Tensor:
    """Groups whose rewards are all equal (they carry no GRPO signal), ``[B]`` bool."""
    return (rewards == rewards[:, :1]).all(dim=1)


def sequence_ratio(logps: Tensor, old_logps: Tensor, mask: Tensor) -> Tensor:
    """GSPO's length-normalised sequence ratio ``exp(mean_t log(pi / pi_old))`` on every token,
    ``[N, L]``."""
    mask = mask.to(logps.dtype)
    seq = ((logps - old_logps) * mask).sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1)
    return seq.exp().expand_as(logps)


def clipped_surrogate(
    ratio: Tensor, advantages: Tensor, mask: Tensor, epsilon: float, epsilon_high: float | None
) -> tuple[Tensor, Tensor]:
    """PPO's pessimistic ``-min(r * A, clip(r, 1 - epsilon, 1 + epsilon_high) * A)`` and where it
    clipped."""
    adv = advantages[:, None]  # [N, 1]
    high = epsilon if epsilon_high is None else epsilon_high
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - epsilon, 1 + high) * adv
    was_clipped = (clipped < unclipped) & mask.bool()
    return -torch.minimum(unclipped, clipped), was_clipped


def dual_clip(per_token: Tensor, advantages: Tensor, clip_ratio_c: float) -> tuple[Tensor, Tensor]:
    """Dual-clip PPO (Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep RL"; verl's
    and EasyR1's ``clip_ratio_c``): where the advantage is negative the surrogate to minimise is
    bounded by ``-clip_ratio_c * A``, so a token whose ratio has grown far above 1 stops pushing
    (its gradient is 0 there).

    Args:
        per_token: The surrogate to minimise, ``[N, L]``.
        advantages: ``[N]``.
        clip_ratio_c: The bound's ratio c (> 1; 3.0 in verl and EasyR1).

    Returns:
        The bounded surrogate ``[N, L]`` and where the bound was active ``[N, L]`` (bool).
    """
    adv = advantages[:, None]  # [N, 1]
    bound = (-clip_ratio_c * adv).to(per_token.dtype).expand_as(per_token)  # [N, L]
    bounded = (adv < 0) & (per_token > bound)
    return torch.where(bounded, bound, per_token), bounded


@register_loss("bnpo", by_tokens, per_batch=True)  # decorators apply bottom-up: grpo is registered first
@register_loss("dapo", by_tokens)
@register_loss("dr_grpo", by_max_tokens)
@register_loss("grpo", by_rows, sequence_mean=True)
def token_ratio_loss(logps, old_logps, advantages, mask, epsilon=0.2, epsilon_high=None):
    """Clipped surrogate with one importance ratio per token (GRPO, Dr. GRPO, DAPO, BNPO)."""
    return clipped_surrogate((logps - old_logps).exp(), advantages, mask, epsilon, epsilon_high)


@register_loss("gspo", by_rows, sequence_mean=True)
def sequence_ratio_loss(logps, old_logps, advantages, mask, epsilon=0.2, epsilon_high=None):
    """Clipped surrogate with the sequence ratio of `sequence_ratio` (GSPO)."""
    return clipped_surrogate(sequence_ratio(logps, old_logps, mask), advantages, mask, epsilon, epsilon_high)


@register_loss("gpg", by_tokens, off_policy=False)
def reinforce_loss(logps, old_logps, advantages, mask, epsilon=0.2, epsilon_high=None):
    """GPG's unclipped REINFORCE ``-A * logp``: no ratio, so only on-policy samples are valid."""
    return -advantages[:, None] * logps, torch.zeros_like(logps, dtype=torch.bool)


class Loss(ABC):
    """A loss type of a user's own, given to a strategy by class path, so it lives in the user's
    code: ``loss_type: {class_path: my_project.losses.MyLoss, init_args: {...}}``. It has what
    `LossType` has.

    Attributes:
        sequence_mean: Average each row over its tokens before rows are summed.
        per_batch: Normalise each batch of an accumulation window on its own (see `LossType`).
        off_policy: Has an importance ratio, so ``num_iterations`` or ``mini_batches > 1`` may
            reuse samples.
    """

    sequence_mean: ClassVar[bool] = False
    per_batch: ClassVar[bool] = False
    off_policy: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return type(self).__name__

    @abstractmethod
    def per_token(
        self,
        logps: Tensor,
        old_logps: Tensor,
        advantages: Tensor,
        mask: Tensor,
        epsilon: float,
        epsilon_high: float | None,
    ) -> tuple[Tensor, Tensor]:
        """The ``[N, L]`` surrogate to minimise and where clipping was active (see
        `per_token_loss`)."""

    def normaliser(self, rows: float, tokens: float, max_new_tokens: int) -> float:
        """Divisor of the summed loss from the kept rows and counted tokens over all ranks: by
        default the token count (a token mean, as ``dapo``)."""
        return tokens


def find_loss(name: str | Loss) -> LossType | Loss:
    """The registered loss type ``name`` (a `Loss` instance is its own); an unknown name is a
    one-line error listing the known ones."""
    if isinstance(name, Loss):
        return name
    if name not in LOSSES:
        raise ValueError(f"loss_type must be one of {tuple(LOSSES)}, got {name!r}")
    return LOSSES[name]


def per_token_loss(
    logps: Tensor,
    old_logps: Tensor,
    advantages: Tensor,
    mask: Tensor,
    loss_type: str | Loss = "grpo",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    clip_ratio_c: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Surrogate per token (to be minimised) and where clipping was active, for a registered loss
    type.

    Args:
        logps: Current log-probs of the sampled tokens, ``[N, L]``.
        old_logps: Log-probs under the sampling policy, ``[N, L]`` (``logps.detach()`` when
            on-policy).
        advantages: ``[N]``.
        mask: Tokens that count, ``[N, L]``.
        loss_type: A key of `LOSSES`, or a `Loss`.
        epsilon: Lower clip range: the ratio is clipped at ``1 - epsilon``.
        epsilon_high: Upper clip range (DAPO clip-higher); defaults to ``epsilon``.
        clip_ratio_c: Dual-clip bound (`dual_clip`) for negative advantages; None leaves it out.

    Returns:
        ``loss`` ``[N, L]`` and ``clipped`` ``[N, L]`` (bool; with ``clip_ratio_c`` also where the
        dual-clip bound was active).
    """
    loss, clipped = find_loss(loss_type).per_token(logps, old_logps, advantages, mask, epsilon, epsilon_high)
    if clip_ratio_c is None:
        return loss, clipped
    loss, bounded = dual_clip(loss, advantages, clip_ratio_c)
    return loss, clipped | (bounded & mask.bool())


def kl_penalty(logps: Tensor, ref_logps: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi (Schulman's k1/k2/k3), ``[N,
    L]``."""
    log_r = ref_logps - logps  # log(pi_ref / pi)
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r**2
    if estimator == "k3":
        return log_r.exp() - log_r - 1
    raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")


def aggregate(values: Tensor, mask: Tensor, loss_type: str | Loss, normaliser: float = 1.0) -> Tensor:
    """Sum of per-token values over rows (each row averaged over its tokens first when the loss type
    has ``sequence_mean``), divided by ``normaliser``: rows of one batch add up to the loss of the
    batch."""
    mask = mask.to(values.dtype)
    if find_loss(loss_type).sequence_mean:
        return ((values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).sum() / normaliser  # rows summed
    return (values * mask).sum() / normaliser


def window_normalisers(loss_type: str | Loss, counts: Tensor, max_new_tokens: int) -> list[float]:
    """Divisor of each batch's summed loss so that the sum over an accumulation window is its loss.

    Args:
        loss_type: A key of `LOSSES`, or a `Loss`.
        counts: Kept rows and counted tokens of each batch of the window over all ranks, ``[k, 2]``.
        max_new_tokens: Completion length limit (Dr. GRPO's constant).

    A ``per_batch`` type divides batch ``b`` by ``k`` times its own normaliser (the mean of
    per-batch losses); any other type divides every batch by the normaliser of the window's total
    counts, so the window's loss is that of one batch holding all its groups. A divisor is never
    below 1.
    """
    spec = find_loss(loss_type)
    if spec.per_batch:
        return [len(counts) * max(float(spec.normaliser(r, t, max_new_tokens)), 1.0) for r, t in counts.tolist()]
    rows, tokens = counts.sum(dim=0).tolist()
    return [max(float(spec.normaliser(rows, tokens, max_new_tokens)), 1.0)] * len(counts)


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
