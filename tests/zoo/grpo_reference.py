"""A policy whose parameters are its logits, a data module whose rewards are fixed, and GRPO written
again from the papers' formulas (not from `zoo.grpo.functional`), so tests can pin the strategy's
gradients exactly.

Every completion row (prompt i, sample g) has its own ``[L, V]`` block of logits in the parameter
``theta``: the gradient on a block is the gradient of the loss with respect to that row's token
log-probs (through a softmax), so a weight, advantage or mask on the wrong row shows in the wrong
block. Everything is float64.

With ``guidance`` (`zoo.hybrid`) the last row of each group is the prompt's demonstration (`EXPERT`:
its tokens and reward), and the SFT phases of `zoo.hybrid.Entropulse` train on the policy's own
completions; both are tokenised by stand-ins of `zoo.sft.demonstrations` (`table_demonstration_ids`,
`table_teacher_forced`) that `train` puts in place.

Run as a script under 2 processes (``RANK`` and friends set, as torchrun sets them) it trains the
cases of `RANK_CASES` with `zoo.grpo.GRPODDPStrategy` (gloo) and saves rank 0's gradients to
``argv[1]``.

Dynamic sampling (``refill_rounds``) refills from `REFILL`: the global refill round ``k`` of batch
key 0 is `REFILL_ROUNDS` ``[k - 1]``, every other key draws only prompts with equal rewards.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from unittest import mock

import torch
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from torch.utils.data import DataLoader, DistributedSampler

from callbacks import GRPOMetrics
from tasks import Example, Reward
from zoo.grpo import GRPODDPStrategy, GRPOStrategy
from zoo.hybrid import LUFFY, SRFT, Entropulse
from zoo.rollout import Rollout
from zoo.rollout.rollout import completion_mask

V, L_MAX, G_MAX, EOS = 5, 6, 4, 0
LR = 10.0  # large, so that a second iteration sees ratios well away from 1 (and clipping)
#: rewards of each prompt's 4 samples; prompts 0, 2, 5, 7 are zero-variance groups. With 2 processes
#: and 2 prompts per rank, rank 0 keeps no group in step 0 (prompts 0, 2) and rank 1 none in step 1
#: (5, 7).
REWARDS = [
    [0, 0, 0, 0],
    [1, 0, 0.5, 0],
    [1, 1, 1, 1],
    [0, 1, 1, 0.25],
    [0.5, 0, 1, 1],
    [0, 0, 0, 0],
    [1, 0.25, 0, 0],
    [0.5, 0.5, 0.5, 0.5],
]
#: rewards of the refill prompts (indices 8-15); 8, 10, 13, 14 and 15 have equal rewards
REFILL_REWARDS = [
    [1, 1, 1, 1],
    [0, 1, 0, 0],
    [0, 0, 0, 0],
    [0.5, 1, 0, 1],
    [0, 0.25, 1, 0],
    [1, 1, 1, 1],
    [0.25, 0.25, 0.25, 0.25],
    [0, 0, 0, 0],
]
#: refill rounds of batch key 0 (4 prompts each, split over ranks like a batch): round 1 has one
#: group with unequal rewards (9, on rank 1 of 2), round 2 two (11, 12, on rank 0): with step 0's
#: batch (groups 1 and 3, both on rank 1) round 2 fills the batch and 12 is left over. A rank that
#: kept its own first B would keep 11 and 12 on rank 0 and leave 9 on rank 1.
REFILL_ROUNDS = [[8, 10, 9, 13], [11, 12, 14, 15]]
EQUAL_ROUND = [8, 10, 13, 14]
#: the groups the two steps of a global batch of 4 train on, by refill_rounds: step 0 holds 1 and 3,
#: round 1 adds 9, round 2 adds 11 (12 is one too many); step 1 holds 4 and 6 and every refill of it
#: has equal rewards
KEPT = {1: [[1, 3, 9], [4, 6]], 2: [[1, 3, 9, 11], [4, 6]], 3: [[1, 3, 9, 11], [4, 6]]}
DEFAULTS = dict(
    num_generations=4,
    temperature=1.0,
    top_p=1.0,
    max_new_tokens=4,
    loss_type="grpo",
    scale_rewards="group",
    epsilon=0.2,
    epsilon_high=None,
    clip_ratio_c=None,
    beta=0.0,
    kl_estimator="k3",
    beta_schedule="constant",
    kl_bias_correction=False,
    num_iterations=1,
    mini_batches=1,
    mask_truncated=False,
    filter_zero_variance=False,
    micro_batch_size=None,
    max_tokens_per_micro_batch=None,
    entropy_coef=0.0,
    max_grad_norm=None,
)


#: settings of the table policy, not of the strategy (the reference ignores them: they change
#: how the work is cut, not the update)
POLICY_SETTINGS = ("pack_sequences",)


def make_examples() -> list[Example]:
    """16 prompts (8 of the batches, then 8 refill ones); sample g of prompt i has random tokens and
    its first EOS at a random place (or none)."""
    rng = torch.Generator().manual_seed(7)
    examples = []
    for i, rewards in enumerate(REWARDS + REFILL_REWARDS):
        tokens = torch.randint(1, V, (G_MAX, L_MAX), generator=rng).tolist()
        eos = [int(e) if e < L_MAX else None for e in torch.randint(0, L_MAX + 2, (G_MAX,), generator=rng)]
        examples.append(
            Example(
                messages=[],
                answer=None,
                task="fixed",
                uid=f"p{i}",
                meta={"index": i, "rewards": rewards, "tokens": tokens, "eos": eos},
            )
        )
    return examples


ALL_EXAMPLES = make_examples()
EXAMPLES, REFILL = ALL_EXAMPLES[: len(REWARDS)], ALL_EXAMPLES[len(REWARDS) :]
#: Each prompt's demonstration: its tokens (EOS placed) and its reward. Prompts 2 and 7 keep groups
#: of equal rewards with the demonstration in them (with G - 1 = 3 samples).
EXPERT_REWARDS = [1, 1, 1, 1, 0.5, 1, 1, 0.5]


def make_expert() -> list[list[int]]:
    rng = torch.Generator().manual_seed(11)
    out = []
    for _ in EXAMPLES:
        tokens = torch.randint(1, V, (L_MAX,), generator=rng).tolist()
        eos = int(torch.randint(0, L_MAX + 2, (), generator=rng))
        if eos < L_MAX:
            tokens[eos] = EOS
        out.append(tokens)
    return out


EXPERT = make_expert()


def demonstrated(tokens: list[int], max_tokens: int | None) -> tuple[list[int], bool]:
    """What zoo trains of a completion given as a demonstration: its tokens through the first EOS
    (one is added when it has none), cut at ``max_tokens``; and whether it was cut."""
    ids = tokens[: tokens.index(EOS) + 1] if EOS in tokens else [*tokens, EOS]
    cut = max_tokens is not None and len(ids) > max_tokens
    return (ids[:max_tokens] if cut else ids), cut


def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    length = max(len(row) for row in rows)
    ids = torch.full((len(rows), length), EOS)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for b, row in enumerate(rows):
        ids[b, : len(row)], mask[b, : len(row)] = torch.tensor(row), True
    return ids, mask


def table_demonstration_ids(policy, examples, replies, max_tokens=None):
    """`zoo.sft.demonstrations.demonstration_ids` for the table policy: each prompt's `EXPERT`
    tokens."""
    rows = [demonstrated(EXPERT[ex.meta["index"]], max_tokens) for ex in examples]
    ids, mask = padded([row for row, _ in rows])
    return ids, mask, torch.tensor([cut for _, cut in rows]), torch.zeros(len(rows), dtype=torch.bool)


def table_teacher_forced(policy, examples, replies, max_tokens=None):
    """`zoo.sft.teacher_forced` for the table policy: completion ``"g"`` of a prompt is its sample
    g, scored on that sample's block of logits."""
    length = max_tokens or L_MAX  # what sampling kept of the sample, then its demonstration
    rows = [
        demonstrated(completion(ex, int(reply), length), max_tokens)
        for ex, reply in zip(examples, replies, strict=True)
    ]
    ids, mask = padded([row for row, _ in rows])
    prompts = SimpleNamespace(tensors={"attention_mask": torch.ones(len(examples), 2)})
    rollout = Rollout(list(examples), prompts, 1, ids, mask, torch.tensor([cut for _, cut in rows]), list(replies))
    rollout.blocks = [int(reply) for reply in replies]
    return rollout, torch.zeros(len(rows), dtype=torch.bool)


#: Prompt tokens of prompt i are ``1 + 5 * i % PROMPT_WIDTH``: rows of very different lengths for
#: the token-budget planner (the table's log-probs do not depend on them).
PROMPT_WIDTH = 12


def prompt_batch(examples: list[Example]) -> SimpleNamespace:
    """The prompts of ``examples`` as the planner sees them: a left-padded attention mask."""
    lengths = torch.tensor([1 + 5 * ex.meta["index"] % PROMPT_WIDTH for ex in examples])
    mask = torch.arange(PROMPT_WIDTH)[None, :] >= PROMPT_WIDTH - lengths[:, None]  # [B, PROMPT_WIDTH]
    return SimpleNamespace(tensors={"attention_mask": mask.long()})


def initial_theta() -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's initial logits and the (different) reference policy's, ``[P * G_MAX, L_MAX,
    V]``; the refill prompts' rows come after the others, from a generator of their own."""
    blocks = []
    for seed, prompts in ((3, EXAMPLES), (4, REFILL)):
        rng = torch.Generator().manual_seed(seed)
        theta = torch.randn(len(prompts) * G_MAX, L_MAX, V, generator=rng, dtype=torch.float64)
        blocks.append((theta, theta + 0.5 * torch.randn(theta.shape, generator=rng, dtype=torch.float64)))
    return torch.cat([blocks[0][0], blocks[1][0]]), torch.cat([blocks[0][1], blocks[1][1]])


def completion(example: Example, g: int, max_new_tokens: int) -> list[int]:
    """Tokens of sample g, EOS placed, cut at ``max_new_tokens``."""
    tokens, eos = list(example.meta["tokens"][g]), example.meta["eos"][g]
    if eos is not None:
        tokens[eos] = EOS
    return tokens[:max_new_tokens]


REFERENCE = initial_theta()[1]


class Recorder(torch.optim.SGD):
    """SGD that keeps a copy of the gradients it is asked to apply (after the strategy's
    clipping)."""

    def __init__(self, params, lr: float):
        super().__init__(params, lr=lr)
        self.grads: list[torch.Tensor | None] = []

    def step(self, closure=None):
        grad = self.param_groups[0]["params"][0].grad
        self.grads.append(None if grad is None else grad.detach().clone())
        return super().step(closure)


class TablePolicy(LightningModule):
    """The `zoo.PolicyModule` interface the strategy uses, over a table of logits; records what it
    is asked."""

    def __init__(self, lr: float = LR, pack_sequences: bool = False):
        super().__init__()
        theta, ref = initial_theta()
        self.theta = torch.nn.Parameter(theta)
        self.ref_theta, self.lr = ref, lr
        self.pack_sequences = pack_sequences  # what the planner charges a pass (`zoo.PolicyModule`)
        self.eos_ids = [EOS]
        self.automatic_optimization = False
        self.sampled, self.chunks, self.reference_calls = [], [], 0
        # tokens of each training pass: padded, rows x (longest prompt + longest completion);
        # packed, the sum of each row's prompt and completion through its last counted token
        self.passes: list[int] = []

    def sample(self, examples, num_generations, *, max_new_tokens, temperature=1.0, top_p=1.0, seed=None):
        self.sampled.append(
            dict(num_generations=num_generations, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        )
        ids = torch.tensor([completion(ex, g, max_new_tokens) for ex in examples for g in range(num_generations)])
        mask, truncated = completion_mask(ids, [EOS])
        prompts = prompt_batch(examples)
        return Rollout(
            list(examples),
            prompts,
            num_generations,
            ids.masked_fill(~mask, EOS),
            mask,
            truncated,
            [str(g) for _ in examples for g in range(num_generations)],
            temperature=temperature,
        )

    def token_log_probs(self, rollout, rows, theta=None, entropy=True):
        theta = self.theta if theta is None else theta
        blocks = getattr(rollout, "blocks", None)  # a teacher-forced rollout names each row's sample
        keys = torch.tensor(
            [
                rollout.example(n).meta["index"] * G_MAX + (blocks[n] if blocks else n % rollout.num_generations)
                for n in rows.tolist()
            ]
        )
        length = rollout.completion_ids.shape[1]
        logp = torch.log_softmax(theta[keys, :length] / rollout.temperature, dim=-1)  # [n, L, V]
        logps = logp.gather(-1, rollout.completion_ids[rows][..., None]).squeeze(-1)  # [n, L]
        return logps, -(logp.exp() * logp).sum(-1)

    def training_step(self, rollout, rows):
        self.chunks.append(len(rows))
        prompts = rollout.prompts.tensors["attention_mask"][rows // rollout.num_generations]  # [n, P]
        if self.pack_sequences:
            counted = rollout.completion_mask[rows]  # [n, L]
            last = [max((j + 1 for j, c in enumerate(row) if c), default=1) for row in counted.tolist()]
            self.passes.append(int(prompts.sum()) + sum(last))
        else:
            self.passes.append(len(rows) * int(prompts.any(0).sum() + rollout.completion_columns(rows)))
        logps, entropy = self.token_log_probs(rollout, rows)
        return {"logps": logps, "entropy": entropy}

    def reference_log_probs(self, rollout, rows):
        self.reference_calls += 1
        return self.token_log_probs(rollout, rows, self.ref_theta)[0]

    def configure_optimizers(self):
        self.recorder = Recorder(self.parameters(), self.lr)
        return self.recorder


class FixedRewards(LightningDataModule):
    """`EXAMPLES` in order (rank r of W takes prompts r, r + W, ...); completion ``"g"`` of a prompt
    earns its ``rewards[g]``."""

    def __init__(self, batch_size: int):
        super().__init__()
        self.batch_size = batch_size
        self.refills: list[tuple[int, int]] = []  # (key, round) of every refill asked for

    def train_dataloader(self):
        sampler = DistributedSampler(EXAMPLES, shuffle=False) if self.trainer.world_size > 1 else None
        return DataLoader(EXAMPLES, batch_size=self.batch_size, sampler=sampler, collate_fn=list)

    def verify(self, example, text):
        if text == "expert":
            reward = float(EXPERT_REWARDS[example.meta["index"]])
        else:
            reward = float(example.meta["rewards"][int(text)])
        return Reward(total=reward, parts={"accuracy": reward})

    def refill(self, key: int, round: int) -> list[Example]:
        """This rank's slice of refill round ``round`` of batch ``key`` (see the module
        docstring)."""
        self.refills.append((key, round))
        prompts = REFILL_ROUNDS[round - 1] if key == 0 and round <= len(REFILL_ROUNDS) else EQUAL_ROUND
        start = self.trainer.global_rank * self.batch_size  # the global round is the first B * W prompts
        return [REFILL[i - len(EXAMPLES)] for i in prompts[start : start + self.batch_size]]

    def demonstration(self, example):
        return "expert"


@dataclass
class Run:
    grads: list
    metrics: dict
    policy: TablePolicy = field(repr=False)
    data: FixedRewards = field(repr=False)


def train(
    settings: dict,
    steps: int = 2,
    batch_size: int = 4,
    accumulate: int = 1,
    lr: float = LR,
    distributed: bool = False,
    metrics: bool = False,
) -> Run:
    """`Trainer.fit` of the table policy under the GRPO strategy (DDP over the launched processes
    when ``distributed``); ``batch_size`` is per rank. ``metrics`` logs them (slow: Lightning's
    ``log``)."""
    strategy_settings = {k: v for k, v in settings.items() if k not in POLICY_SETTINGS}
    arguments = DEFAULTS | strategy_settings | {"guidance": guidance_of(settings)}
    strategy = GRPODDPStrategy(process_group_backend="gloo", **arguments) if distributed else GRPOStrategy(**arguments)
    policy = TablePolicy(lr, **{k: settings[k] for k in POLICY_SETTINGS if k in settings})
    with (
        mock.patch("zoo.hybrid.expert.demonstration_ids", table_demonstration_ids),
        mock.patch("zoo.hybrid.entropulse.teacher_forced", table_teacher_forced),
    ):
        return _fit(policy, strategy, steps, batch_size, accumulate, distributed, metrics)


def _fit(policy, strategy, steps, batch_size, accumulate, distributed, metrics) -> Run:
    trainer = Trainer(
        max_steps=steps,
        strategy=strategy,
        accelerator="cpu",
        devices=2 if distributed else 1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[GRPOMetrics(summary=False)] if metrics else [],
        limit_val_batches=0,
        num_sanity_val_steps=0,
        accumulate_grad_batches=accumulate,
        log_every_n_steps=1,
        use_distributed_sampler=False,
    )
    data = FixedRewards(batch_size)
    trainer.fit(policy, data)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    return Run(policy.recorder.grads, metrics, policy, data)


# ---- GRPO again, from the formulas
# -------------------------------------------------------------------
GUIDANCE = {"luffy": LUFFY, "srft": SRFT, "entropulse": Entropulse}


def guidance_of(s: dict):
    """A fresh guidance object from a settings spec ``(kind, arguments)`` (they hold state), or
    None."""
    spec = s.get("guidance")
    return None if spec is None else GUIDANCE[spec[0]](**spec[1])


def expert_row(s: dict, g: int) -> bool:
    """Whether row g of each group is the demonstration (the last row, with LUFFY or SRFT)."""
    return s.get("guidance") is not None and s["guidance"][0] in ("luffy", "srft") and g == s["num_generations"] - 1


def group_rewards(ex: Example, s: dict) -> list[float]:
    G = s["num_generations"]
    if expert_row(s, G - 1):
        return [*ex.meta["rewards"][: G - 1], EXPERT_REWARDS[ex.meta["index"]]]
    return ex.meta["rewards"][:G]


def advantages(window: list[list[Example]], s: dict) -> dict[tuple[int, int], float]:
    """Advantage of every (prompt index, g) of the window's groups."""
    out = {}
    groups = [group_rewards(ex, s) for batch in window for ex in batch]
    everyone = [r for rewards in groups for r in rewards]
    equal = sum(len(set(rewards)) == 1 for rewards in groups)
    gpg = 1 / max(1 - equal / len(groups), 0.05)  # GPG: B / (B - M), M groups of equal rewards, floor 0.05
    for ex in (ex for batch in window for ex in batch):
        rewards = group_rewards(ex, s)
        mean = statistics.fmean(rewards)
        scale = {
            "group": statistics.stdev(rewards) + 1e-4,
            "batch": statistics.stdev(everyone) + 1e-4,
            "none": 1.0,
            "gpg": 1 / gpg,
        }[s["scale_rewards"]]
        out.update({(ex.meta["index"], g): (r - mean) / scale for g, r in enumerate(rewards)})
    return out


def row_tokens(ex: Example, g: int, s: dict) -> tuple[list[int], list[bool]]:
    """Tokens of row g of ``ex``'s group and which of them count."""
    if expert_row(s, g):
        ids, cut = demonstrated(EXPERT[ex.meta["index"]], s["max_new_tokens"])
        return ids, [not (cut and s["mask_truncated"])] * len(ids)
    ids, eos = completion(ex, g, s["max_new_tokens"]), ex.meta["eos"][g]
    truncated = eos is None or eos >= s["max_new_tokens"]
    counts = [
        t <= (len(ids) if truncated else eos) and not (truncated and s["mask_truncated"]) for t in range(len(ids))
    ]
    return ids, counts


def token_terms(theta, old, ex: Example, g: int, adv: float, s: dict, beta: float) -> tuple[list, list, list]:
    """Per-token loss terms of row g of ``ex``'s group, which tokens count, and the SFT terms of a
    demonstration row (SRFT's ``w_SFT * -log pi``; zeros elsewhere)."""
    ids, counts = row_tokens(ex, g, s)
    key, guide, expert = ex.meta["index"] * G_MAX + g, guidance_of(s), expert_row(s, g)

    def logp_of(table, t):
        return torch.log_softmax(table[key, t] / s["temperature"], dim=-1)

    logp = [logp_of(theta, t)[i] for t, i in enumerate(ids)]
    old_logp = [logp_of(old, t)[i].detach() for t, i in enumerate(ids)]
    ratio = [torch.exp(a - b) for a, b in zip(logp, old_logp, strict=True)]
    if s["loss_type"] == "gspo":
        n = max(sum(counts), 1)
        seq = torch.exp(sum(a - b for a, b, c in zip(logp, old_logp, counts, strict=True) if c) / n)
        ratio = [seq] * len(ids)
    low, high = 1 - s["epsilon"], 1 + (s["epsilon"] if s["epsilon_high"] is None else s["epsilon_high"])
    terms, sft = [], []
    for t, i in enumerate(ids):
        probs = torch.softmax(theta[key, t] / s["temperature"], dim=-1)
        entropy = -(probs * logp_of(theta, t)).sum()
        if expert:  # behaviour probability taken as 1, shaped, not clipped (LUFFY)
            p = torch.exp(logp[t])
            term = -adv * (p if guide.shaping == 0 else p / (p + guide.shaping))
        elif s["loss_type"] == "gpg":
            term = -adv * logp[t]
        else:
            term = -torch.minimum(ratio[t] * adv, torch.clamp(ratio[t], low, high) * adv)
            if s["clip_ratio_c"] is not None and adv < 0:  # dual clip: at most -c * A
                term = torch.minimum(term, torch.tensor(-s["clip_ratio_c"] * adv, dtype=term.dtype))
        srft = isinstance(guide, SRFT)
        if srft and not expert and guide.positive_coef is not None and adv > 0:  # w_RL
            term = term * guide.positive_coef * (torch.exp(entropy.detach()) if guide.entropy_aware else 1)
        if s["beta"]:
            log_r = logp_of(REFERENCE, t)[i] - logp[t]  # log(pi_ref / pi)
            kl = {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": torch.exp(log_r) - log_r - 1}[s["kl_estimator"]]
            term = term + beta * kl * (torch.exp(logp[t] - old_logp[t]) if s["kl_bias_correction"] else 1)
        terms.append(term - s["entropy_coef"] * entropy)
        w_sft = guide.sft_coef * (torch.exp(-entropy.detach()) if guide.entropy_aware else 1) if srft else 0
        sft.append(w_sft * -logp[t] if expert else 0.0)
    return terms, counts, sft


def window_loss(theta, old, window: list[list[Example]], s: dict, beta: float, only=None) -> torch.Tensor:
    """The loss of one optimizer step over the window's batches, written out per loss type, plus
    SRFT's SFT term (a token mean over the window's demonstration tokens); with ``only`` (prompt
    indices: a mini-batch) over those groups, advantages still over the whole window."""
    adv = advantages(window, s)
    per_batch = []  # (sum of token terms, sum of row means, rows, tokens) of each batch
    sft_total, sft_tokens = 0.0, 0
    for batch in window:
        total, row_means, rows, tokens = 0.0, 0.0, 0, 0
        for ex in batch:
            if s["filter_zero_variance"] and len(set(group_rewards(ex, s))) == 1:
                continue
            if only is not None and ex.meta["index"] not in only:
                continue
            for g in range(s["num_generations"]):
                terms, counts, sft = token_terms(theta, old, ex, g, adv[ex.meta["index"], g], s, beta)
                kept = sum(term for term, c in zip(terms, counts, strict=True) if c)
                total, row_means = total + kept, row_means + kept / max(sum(counts), 1)
                rows, tokens = rows + 1, tokens + sum(counts)
                sft_total = sft_total + sum(term for term, c in zip(sft, counts, strict=True) if c)
                sft_tokens += sum(counts) if expert_row(s, g) else 0
        per_batch.append((total, row_means, rows, tokens))
    return rl_loss(per_batch, s) + sft_total / max(sft_tokens, 1)


def rl_loss(per_batch: list[tuple], s: dict):
    rows, tokens = sum(b[2] for b in per_batch), sum(b[3] for b in per_batch)
    kind = s["loss_type"]
    if kind in ("grpo", "gspo"):
        return sum(b[1] for b in per_batch) / max(rows, 1)
    if kind == "dr_grpo":
        return sum(b[0] for b in per_batch) / max(rows * s["max_new_tokens"], 1)
    if kind == "bnpo":  # each batch's token mean, averaged over the window's batches
        return sum(b[0] / max(b[3], 1) for b in per_batch) / len(per_batch)
    return sum(b[0] for b in per_batch) / max(tokens, 1)  # dapo, gpg


def nll_gradient(theta, pairs: list[tuple[Example, int]], s: dict) -> torch.Tensor:
    """Gradient of the token-mean NLL of sample g of each ``(example, g)`` given as a demonstration
    (an Entropulse SFT step: teacher forcing at temperature 1 on the sample's block of logits)."""
    variable = theta.clone().requires_grad_()
    terms = []
    for ex, g in pairs:
        ids, _ = demonstrated(completion(ex, g, s["max_new_tokens"]), s["max_new_tokens"])
        key = ex.meta["index"] * G_MAX + g
        terms += [-torch.log_softmax(variable[key, t], dim=-1)[i] for t, i in enumerate(ids)]
    (grad,) = torch.autograd.grad(sum(terms) / len(terms), variable)
    return grad


def mini_batch_prompts(window: list[list[Example]], s: dict, ranks: int) -> list[set[int]]:
    """The prompts of each mini-batch: rank r of ``ranks`` holds prompts r, r + W, ... of each
    batch (a distributed sampler without shuffling), splits its kept groups in order into
    ``mini_batches`` shares (the first ones one group larger), and mini-batch j joins share j of
    every rank."""
    out = [set() for _ in range(s["mini_batches"])]
    for batch in window:
        for r in range(ranks):
            kept = [
                ex.meta["index"]
                for ex in batch[r::ranks]
                if not (s["filter_zero_variance"] and len(set(group_rewards(ex, s))) == 1)
            ]
            size, extra = divmod(len(kept), s["mini_batches"])
            start = 0
            for j in range(s["mini_batches"]):
                end = start + size + (j < extra)
                out[j] |= set(kept[start:end])
                start = end
    return out


def beta_at(s: dict, step: int, steps: int) -> float:
    progress = step / steps
    return (
        s["beta"]
        * {"constant": 1.0, "linear": 1 - progress, "cosine": 0.5 * (1 + math.cos(math.pi * progress))}[
            s["beta_schedule"]
        ]
    )


def reference(
    settings: dict,
    steps: int = 2,
    batch_size: int = 4,
    accumulate: int = 1,
    lr: float = LR,
    batches: list[list[int]] | None = None,
    ranks: int = 1,
) -> list[dict]:
    """Gradient (after clipping), its norm before clipping and the loss of each optimizer step, by
    SGD over global batches of ``batch_size`` prompts (or the prompt indices ``batches``),
    ``accumulate`` per step; mini-batches are split as ``ranks`` processes split them."""
    s = DEFAULTS | settings
    theta = initial_theta()[0]
    if batches is None:
        batches = [EXAMPLES[i : i + batch_size] for i in range(0, len(EXAMPLES), batch_size)]
    else:
        batches = [[ALL_EXAMPLES[i] for i in batch] for batch in batches]
    steps_done, b, out = 0, 0, []
    while steps_done < steps:
        window = [batches[(b + j) % len(batches)] for j in range(accumulate)]
        b, old = b + accumulate, theta.clone()
        only = [None] if s["mini_batches"] == 1 else mini_batch_prompts(window, s, ranks)
        for prompts in [p for _ in range(s["num_iterations"]) for p in only]:
            if prompts == set():  # a mini-batch of no group on any rank: a step without a gradient
                out.append(dict(grad=None, norm=0.0, loss=0.0))
                steps_done += 1
                continue
            variable = theta.clone().requires_grad_()
            loss = window_loss(variable, old, window, s, beta_at(s, steps_done, steps), prompts)
            (grad,) = torch.autograd.grad(loss, variable)
            norm = float(grad.norm())
            if s["max_grad_norm"] is not None:
                grad = grad * min(1.0, s["max_grad_norm"] / (norm + 1e-6))
            out.append(dict(grad=grad, norm=norm, loss=float(loss.detach())))
            theta, steps_done = theta - lr * grad, steps_done + 1
    return out


# ---- two processes
# -------------------------------------------------------------------------------------
#: 2-process cases: every loss type with and without the filter (entropy and KL terms on, uneven
#: micro-batches), plus batch-std advantages and accumulation.
RANK_CASES = {
    f"{loss}-filter={f}": dict(loss_type=loss, filter_zero_variance=f, entropy_coef=0.1, beta=0.2, micro_batch_size=3)
    for loss in ("grpo", "dr_grpo", "dapo", "bnpo", "gspo", "gpg")
    for f in (False, True)
}
RANK_CASES |= {
    f"token-budget-{loss}": dict(
        loss_type=loss, filter_zero_variance=True, entropy_coef=0.1, beta=0.2, max_tokens_per_micro_batch=30
    )
    for loss in ("grpo", "dapo")
}
RANK_CASES |= {
    "token-budget-packed-dapo": dict(
        loss_type="dapo",
        filter_zero_variance=True,
        entropy_coef=0.1,
        beta=0.2,
        max_tokens_per_micro_batch=30,
        pack_sequences=True,
    ),
    "batch-std": dict(scale_rewards="batch", filter_zero_variance=True),
    "gpg-advantage": dict(scale_rewards="gpg", loss_type="gpg"),
    "iterations": dict(num_iterations=2, epsilon=0.05, loss_type="dapo", filter_zero_variance=True),
    "srft": dict(guidance=("srft", {}), filter_zero_variance=True, micro_batch_size=3, beta=0.2),
}
DYNAMIC_RANK_CASES = {
    "dynamic-grpo": dict(refill_rounds=2, entropy_coef=0.1, beta=0.2, micro_batch_size=3),
    "dynamic-bnpo-batch-std": dict(refill_rounds=2, loss_type="bnpo", scale_rewards="batch", entropy_coef=0.1),
    "dynamic-cap-dapo": dict(refill_rounds=1, loss_type="dapo", entropy_coef=0.1),
}
#: 2-process mini-batch cases and their optimizer steps (two rollouts each): with 3 mini-batches of
#: 4 prompts each rank's 2 groups make shares of 1, 1 and 0 groups, so mini-batches hold 2, 2 and 0
#: groups (one process holding the batch makes 2, 1, 1).
MINI_BATCH_RANK_CASES = {
    "mini-batches-grpo": (dict(mini_batches=3, entropy_coef=0.1, beta=0.2, micro_batch_size=3), 6),
    "mini-batches-dapo-iterations-dual-clip": (
        dict(
            mini_batches=2,
            num_iterations=2,
            loss_type="dapo",
            filter_zero_variance=True,
            clip_ratio_c=1.2,
            beta=2.0,
            epsilon=0.05,
        ),
        8,
    ),
}
ACCUMULATED_RANK_CASES = {
    f"accumulate-{loss}": dict(loss_type=loss, filter_zero_variance=True, entropy_coef=0.1)
    for loss in ("dapo", "grpo", "bnpo")
}


def rank_main(out: str) -> None:
    results = {}
    for name, settings in (RANK_CASES | DYNAMIC_RANK_CASES).items():
        results[name] = train(settings, steps=2, batch_size=2, distributed=True).grads
    for name, (settings, steps) in MINI_BATCH_RANK_CASES.items():
        results[name] = train(settings, steps=steps, batch_size=2, distributed=True).grads
    for name, settings in ACCUMULATED_RANK_CASES.items():
        results[name] = train(settings, steps=1, batch_size=1, accumulate=2, distributed=True).grads
    if int(os.environ["RANK"]) == 0:
        torch.save(results, out)


if __name__ == "__main__":
    rank_main(sys.argv[1])
