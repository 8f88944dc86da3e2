"""A demonstration in every GRPO group: LUFFY's off-policy guidance (Yan et al. 2025, "Learning to
Reason under Off-Policy Guidance", arXiv 2504.14945) and SRFT's single-stage SFT + RL (Fu et al.
2025, "SRFT: A Single-Stage Method with Supervised and Reinforcement Fine-Tuning for Reasoning",
arXiv 2506.19767).

Each prompt's demonstration (the data module's ``demonstration(example)``: a pretext task's perfect
answer) is tokenised as the policy would write it (`zoo.sft.demonstrations.demonstration_ids`) and
joins the prompt's group as its last completion, so the group holds G - 1 samples and the expert
row; rewards and advantages are computed over all G.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from zoo import data
from zoo.grpo.guidance import Guidance
from zoo.hybrid import functional as H
from zoo.rollout.rollout import Rollout
from zoo.sft.demonstrations import demonstration_ids
from zoo.sft.functional import sft_loss, token_nll

log = logging.getLogger(__name__)


@dataclass
class GuidedRollout(Rollout):
    """A rollout whose groups hold expert rows.

    Attributes:
        expert: ``[N]`` bool, the rows that are demonstrations.
    """

    expert: Tensor | None = None


def join_groups(
    rollout: Rollout, ids: Tensor, mask: Tensor, truncated: Tensor, replies: list[str], pad: int
) -> GuidedRollout:
    """Each prompt's sampled rows followed by its demonstration row: a rollout of ``G = sampled +
    1`` per prompt.

    Args:
        rollout: The sampled completions, ``B * g`` rows.
        ids: The demonstrations' completion ids, ``[B, L']``.
        mask: Their trained tokens, ``[B, L']``.
        truncated: ``[B]``, demonstrations cut at the length limit.
        replies: The B demonstration texts.
        pad: Token id of the added columns (outside every mask).
    """
    b = len(rollout.examples)
    g = rollout.num_generations
    length = max(rollout.completion_ids.shape[1], ids.shape[1])
    device = rollout.completion_ids.device

    def joined(sampled: Tensor, expert: Tensor, value) -> Tensor:  # [B * g, L], [B, L'] -> [B * (g + 1), length]
        sampled = torch.nn.functional.pad(sampled, (0, length - sampled.shape[1]), value=value).view(b, g, length)
        expert = torch.nn.functional.pad(expert.to(device), (0, length - expert.shape[1]), value=value)
        return torch.cat([sampled, expert[:, None]], dim=1).view(b * (g + 1), length)

    texts = [text for i in range(b) for text in [*rollout.completions[i * g : (i + 1) * g], replies[i]]]
    flags = torch.zeros(b, g + 1, dtype=torch.bool, device=device)
    flags[:, -1] = True
    kept = {f.name: getattr(rollout, f.name) for f in fields(Rollout)}
    return GuidedRollout(
        **kept
        | dict(
            num_generations=g + 1,
            completion_ids=joined(rollout.completion_ids, ids, pad),
            completion_mask=joined(rollout.completion_mask, mask, False),
            truncated=torch.cat([rollout.truncated.view(b, g), truncated.to(device)[:, None]], dim=1).flatten(),
            completions=texts,
        ),
        expert=flags.flatten(),
    )


def expert_rows(part, rows: Tensor) -> Tensor:
    """Which of ``rows`` of a window part are demonstrations, ``[n]`` bool on the device of the
    part's mask (none for a plain rollout)."""
    expert = getattr(part.rollout, "expert", None)
    if expert is None:
        return torch.zeros(len(rows), dtype=torch.bool, device=part.mask.device)
    return expert[rows.to(expert.device)].to(part.mask.device)


class LUFFY(Guidance):
    """Off-policy expert guidance (LUFFY): each prompt's demonstration is one of its G completions.

    The expert row's behaviour policy is unknown, so it has no old log-prob: its importance weight
    is the policy's own token probability (the ratio with the behaviour probability taken as 1),
    shaped by LUFFY's regularized importance sampling ``f(pi) = pi / (pi + shaping)``, and it is not
    clipped. Its per-token term is ``-A * f(pi)`` (LUFFY's mixed-policy objective), where ``A`` is
    its advantage in its group of G - 1 samples and itself; the sampled rows keep the loss type's
    surrogate. Rows are summed and normalised as the ``loss_type`` says, expert rows counted like
    the others. The KL and entropy terms (``beta``, ``entropy_coef``) apply to every row.
    ``train/reward`` counts the sampled rows only; ``train/hybrid/expert_reward`` is the
    demonstrations' mean reward, ``train/hybrid/expert_prob`` the policy's mean probability of their
    tokens.

    Args:
        shaping: gamma of the policy shaping (0.1 in LUFFY's runs); 0 trains on ``-A * pi``
            unshaped.
    """

    def __init__(self, shaping: float = 0.1):
        if shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        self.shaping = shaping
        self._warned = False

    def attach(self, strategy) -> None:
        if strategy.num_generations < 2:
            raise ValueError("expert guidance needs num_generations >= 2: one demonstration and a sample")

    def data_needs(self) -> list[data.Need]:
        return [data.DEMONSTRATIONS]

    def sampled(self, num_generations: int) -> int:
        return num_generations - 1

    def extend(self, strategy, rollout, rewards: list, means) -> tuple:
        datamodule = strategy.lightning_module.trainer.datamodule
        tasks = getattr(datamodule, "tasks", {}).items()
        if unlabelled := sorted(n for n, t in tasks if getattr(t, "self_reward", None) is not None):
            raise ValueError(
                f"expert guidance scores the demonstrations against their answers, which the "
                f"self-rewarded tasks {unlabelled} do not use: drop their self_reward or the guidance"
            )
        examples = rollout.examples
        replies = [datamodule.demonstration(example) for example in examples]
        ids, mask, truncated, dropped = demonstration_ids(
            strategy.lightning_module, examples, replies, strategy.max_new_tokens
        )
        if dropped.any() and not self._warned:
            self._warned = True
            log.warning(
                "a demonstration holds a media placeholder or another token the policy never emits; its "
                "row trains nothing (counted in train/hybrid/expert_dropped)"
            )
        expert_rewards = [datamodule.verify(example, reply) for example, reply in zip(examples, replies, strict=True)]
        pad = int(strategy.lightning_module.eos_ids[0])
        guided = join_groups(rollout, ids, mask, truncated, replies, pad)
        g = rollout.num_generations
        joined = [r for i, expert in enumerate(expert_rewards) for r in [*rewards[i * g : (i + 1) * g], expert]]
        means.add(
            "train/hybrid/expert_reward",
            sum(r.total for r in expert_rewards) / len(expert_rewards),
            len(expert_rewards),
        )
        means.add("train/hybrid/expert_dropped", float(dropped.float().mean()), len(expert_rewards))
        return guided, joined

    def adjust(self, strategy, part, rows: Tensor, out: dict, per_token: Tensor, means) -> tuple[Tensor, Tensor]:
        expert = expert_rows(part, rows).to(per_token.device)  # [n]
        logps = out["logps"]
        off_policy = H.expert_surrogate(logps, part.advantages[rows], self.shaping)  # [n, L]
        per_token = torch.where(expert[:, None], off_policy, per_token)
        if means is not None:
            tokens = part.mask[rows].to(per_token.device) & expert[:, None]
            count = float(tokens.sum())
            if count:
                means.add("train/hybrid/expert_prob", float((logps.detach().exp() * tokens).sum()) / count, count)
        return per_token, torch.zeros((), device=per_token.device)


class SRFT(LUFFY):
    """Single-stage SFT + RL with entropy-aware weights (SRFT, Fu et al. 2025, section 4): the
    demonstrations join the groups as in `LUFFY`, and two entropy-weighted terms are added.

    The loss is ``L_SRFT = L_SFT^demo + L_RL^demo + L_RL^self-rollout`` (the paper's total loss):

    - ``L_SFT^demo = w_SFT * NLL`` of the demonstration tokens, with the paper's entropy-aware SFT
      weight ``w_SFT = sft_coef * stopgrad(exp(-H))``, normalised by the number of demonstration
      tokens of the whole optimizer step (every micro-batch, accumulated batch and rank);
    - ``L_RL^demo``: the demonstrations as off-policy rows of their groups with the behaviour policy
      taken as 1 and no clipping, ``-A * f(pi)`` (`LUFFY`; the paper writes ``f(pi) = pi``, its
      released runs shape it with gamma 0.1, this class's default);
    - ``L_RL^self-rollout``: the loss type's surrogate on the sampled rows, with the tokens of rows
      of positive advantage weighted by the paper's ``w_RL = positive_coef * stopgrad(exp(H))``.

    ``H`` is the entropy of the policy's next-token distribution at each token (the authors' code
    computes it per token; the paper writes ``H(pi_theta)``). Logged: ``train/hybrid/sft_loss``
    (token-mean NLL of the demonstrations), ``train/hybrid/sft_weight`` and
    ``train/hybrid/positive_weight`` (mean weights), and the `LUFFY` metrics.

    Args:
        sft_coef: The 0.5 of ``w_SFT``; 0 drops the SFT term.
        positive_coef: The 0.1 of ``w_RL``; None leaves the sampled rows' surrogate unweighted.
        entropy_aware: False makes both weights constants (``sft_coef``, ``positive_coef``): the
            ablation of the entropy terms.
        shaping: gamma of the expert rows' policy shaping (see `LUFFY`).
    """

    def __init__(
        self, sft_coef: float = 0.5, positive_coef: float | None = 0.1, entropy_aware: bool = True, shaping: float = 0.1
    ):
        super().__init__(shaping)
        if sft_coef < 0 or (positive_coef is not None and positive_coef < 0):
            raise ValueError(f"sft_coef and positive_coef must be >= 0, got {sft_coef}, {positive_coef}")
        self.sft_coef = sft_coef
        self.positive_coef = positive_coef
        self.entropy_aware = entropy_aware
        self._sft_divisor = 1.0

    def prepare(self, strategy, parts: list) -> None:
        """The SFT normaliser: demonstration tokens of the window's kept rows over every rank
        (gradients are averaged over ranks, so each divides by that count over the world size)."""
        count = sum(
            float(part.mask[part.rows.to(part.mask.device)][expert_rows(part, part.rows)].sum()) for part in parts
        )
        total = strategy.reduce(torch.tensor(count, device=strategy.root_device), reduce_op="sum")
        self._sft_divisor = max(float(total), 1.0) / strategy.world_size

    def adjust(self, strategy, part, rows: Tensor, out: dict, per_token: Tensor, means) -> tuple[Tensor, Tensor]:
        per_token, _ = super().adjust(strategy, part, rows, out, per_token, means)
        expert = expert_rows(part, rows).to(per_token.device)  # [n]
        entropy, logps = out["entropy"], out["logps"]  # [n, L]
        if self.positive_coef is not None:
            weights = H.positive_weights(entropy, part.advantages[rows], self.positive_coef, self.entropy_aware)
            per_token = torch.where(expert[:, None], per_token, per_token * weights)
        tokens = part.mask[rows].to(per_token.device) & expert[:, None]  # [n, L]
        if self.entropy_aware:
            sft_weights = H.entropy_weight(entropy, self.sft_coef, -1.0)
        else:
            sft_weights = torch.full_like(entropy, self.sft_coef)
        extra = sft_loss(logps, tokens, "token", divisor=self._sft_divisor, weights=sft_weights)
        if means is not None:
            self._log(means, part, rows, out, tokens, sft_weights, expert)
        return per_token, extra

    def _log(self, means, part, rows: Tensor, out: dict, tokens: Tensor, sft_weights: Tensor, expert: Tensor):
        count = float(tokens.sum())
        if count:
            means.add("train/hybrid/sft_loss", float(token_nll(out["logps"].detach(), tokens).sum()) / count, count)
            means.add("train/hybrid/sft_weight", float((sft_weights * tokens).sum()) / count, count)
        if self.positive_coef is not None:
            positive = part.mask[rows].to(tokens.device) & (~expert & (part.advantages[rows] > 0))[:, None]
            weights = H.positive_weights(out["entropy"], part.advantages[rows], self.positive_coef, self.entropy_aware)
            if positive.any():
                means.add(
                    "train/hybrid/positive_weight",
                    float((weights * positive).sum() / positive.sum()),
                    float(positive.sum()),
                )
