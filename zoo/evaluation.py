"""Held-out evaluation scores: per-example accuracy, reward, unbiased pass@k (Chen et al. 2021,
"Evaluating Large Language Models Trained on Code") and majority-vote maj@k (the self-consistency
score GUI-RC and Video-RTS report), and a torchmetrics metric that averages them per task over every
rank.

A completion is *correct* when its reward's ``accuracy`` part is 1 (full credit): for graded tasks
(fraction in place, IoU, relative count error) partial credit counts towards ``accuracy`` but never
towards pass@k.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable

import torch
from torch import Tensor
from torchmetrics import Metric

from tasks.regions import Region, region_winner
from zoo import data
from zoo.data import verify
from zoo.rollout.turns import sample_batch


def is_correct(reward) -> bool:
    """Full credit: the ``accuracy`` part is 1 (a reward without one is never correct)."""
    return reward.parts.get("accuracy", 0.0) >= 1.0


def pass_at_k(correct: Tensor, n: int, k: int) -> Tensor:
    """Unbiased pass@k per example: the chance that k of the n samples, drawn without replacement,
    hold at least one correct one, ``1 - C(n - c, k) / C(n, k)`` (exact integer binomials).

    Args:
        correct: Correct samples ``c`` of each example, ``[B]`` integers in ``[0, n]``.
        n: Samples per example.
        k: Samples drawn, ``1 <= k <= n``.
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    total = math.comb(n, k)
    return torch.tensor([1.0 - math.comb(n - int(c), k) / total for c in correct], dtype=torch.float64)  # [B]


def majority_at_k(ballots: list[Hashable | None], accuracy: Tensor, n: int, k: int) -> Tensor:
    """maj@k per example: the ``accuracy`` of the answer most of the first ``k`` of its ``n``
    samples state, 0 when none states a valid one.

    Args:
        ballots: Each sample's answer in canonical form (`tasks.Task.canonical_answer`; None: no
            valid answer, no vote), ``B * n``, rows of one example contiguous.
        accuracy: The ``accuracy`` reward part of each sample, ``[B * n]``.
        n: Samples per example.
        k: Samples that vote, ``1 <= k <= n``: the first k (the samples are independent, so any k
            are alike in expectation). A tie goes to the answer stated first. Regions
            (`tasks.regions.Region`, the ballots of grounding tasks) vote by overlap, as GUI-RC
            does: the one that lies most within the consensus of the k wins
            (`tasks.regions.region_winner`).
    """
    if not 1 <= k <= n:
        raise ValueError(f"maj@k needs 1 <= k <= n, got k={k}, n={n}")
    out = []
    for start in range(0, len(ballots), n):
        votes = [b for b in ballots[start : start + k] if b is not None]
        if not votes:
            out.append(0.0)
            continue
        group = ballots[start : start + k]
        if all(isinstance(v, Region) for v in votes):  # grounding: GUI-RC's vote by overlap
            out.append(float(accuracy[start + region_winner(group)]))
            continue
        winner = Counter(votes).most_common(1)[0][0]  # equal counts keep first-seen order
        out.append(float(accuracy[start + group.index(winner)]))
    return torch.tensor(out, dtype=torch.float64)  # [B]


def check_eval_settings(
    n: int, temperature: float, top_p: float, ks: list[int] | None, maj_ks: list[int] | None = None
) -> list[int]:
    """The sorted pass@k values of an evaluation with ``n`` samples per example at ``temperature``
    (None gives 1 and n); a ValueError naming the strategy setting when a value is out of range
    (``maj_ks``, the maj@k values, too)."""
    ks = sorted({1, n}) if ks is None else sorted(set(ks))
    problems = [
        (n >= 1, f"eval_num_generations must be >= 1, got {n}"),
        (temperature >= 0, f"eval_temperature must be >= 0 (0 is greedy), got {temperature}"),
        (
            temperature > 0 or n == 1,
            f"eval_num_generations={n} with eval_temperature=0: greedy decoding gives n "
            "identical completions; set eval_temperature > 0 to sample",
        ),
        (0 < top_p <= 1, f"eval_top_p must be in (0, 1], got {top_p}"),
        (all(1 <= k <= n for k in ks), f"eval_pass_k values must be in [1, eval_num_generations={n}], got {ks}"),
        (
            all(1 <= k <= n for k in maj_ks or []),
            f"eval_maj_k values must be in [1, eval_num_generations={n}], got {maj_ks}",
        ),
    ]
    for ok, message in problems:
        if not ok:
            raise ValueError(message)
    return ks


def example_scores(
    rewards: list, num_generations: int, ks: list[int], ballots: list | None = None, maj_ks: list[int] = ()
) -> dict[str, Tensor]:
    """``accuracy`` and ``reward`` (means over each example's samples), ``pass@<k>`` for each k and
    ``maj@<k>`` for each of ``maj_ks`` (from the samples' ``ballots``), all ``[B]``, from the ``B *
    num_generations`` rewards of a rollout (rows of one example contiguous)."""
    accuracy = torch.tensor([r.parts.get("accuracy", 0.0) for r in rewards], dtype=torch.float64)  # [N]
    total = torch.tensor([r.total for r in rewards], dtype=torch.float64)  # [N]
    correct = torch.tensor([is_correct(r) for r in rewards]).view(-1, num_generations).sum(1)  # [B]
    scores = {"accuracy": accuracy.view(-1, num_generations).mean(1), "reward": total.view(-1, num_generations).mean(1)}
    scores |= {f"pass@{k}": pass_at_k(correct, num_generations, k) for k in ks}
    return scores | {f"maj@{k}": majority_at_k(ballots, accuracy, num_generations, k) for k in maj_ks}


class TaskMeans(Metric):
    """Means of named per-example scores, overall and per task, summed over ranks by torchmetrics (a
    rank that saw no example of a task contributes zeros, so every rank holds the same fixed-shape
    states).

    Args:
        tasks: Task names to report separately; examples of other tasks count only in the overall
            means.
        names: Score names (keys of `example_scores`).
    """

    full_state_update = False

    def __init__(self, tasks: list[str], names: list[str]):
        super().__init__()
        self.tasks = list(tasks)
        self.names = list(names)
        rows = 1 + len(self.tasks)  # row 0: every example
        self.add_state("sums", torch.zeros(rows, len(self.names), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("counts", torch.zeros(rows, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, tasks: list[str], scores: dict[str, Tensor]) -> None:
        values = torch.stack([scores[name] for name in self.names], dim=1).to(self.sums)  # [B, Q]
        rows = torch.tensor(
            [1 + self.tasks.index(t) if t in self.tasks else 0 for t in tasks], device=self.sums.device
        )  # [B]
        known = rows > 0
        self.sums[0] += values.sum(0)
        self.counts[0] += len(values)
        self.sums.index_add_(0, rows[known], values[known])
        self.counts.index_add_(0, rows[known], torch.ones_like(values[known, 0]))

    def compute(self) -> dict[str, float]:
        """``<name>`` and ``<task>/<name>`` means, and ``examples`` / ``<task>/examples`` counts;
        tasks without examples are left out."""
        out = {}
        for row, prefix in enumerate(["", *(f"{t}/" for t in self.tasks)]):
            count = float(self.counts[row])
            if count > 0:
                out |= {f"{prefix}{name}": float(self.sums[row, q]) / count for q, name in enumerate(self.names)}
                out[f"{prefix}examples"] = count
        return out


class Evaluation:
    """How a strategy scores held-out examples (``validate``, ``test`` and the validations during
    ``fit``): ``num_generations`` completions per example, greedy or sampled with a fixed seed,
    their rewards and per-example scores (accuracy, reward, pass@k) that the metrics callback
    averages.

    Args:
        num_generations: n, completions per example; each is one row of the predictions file.
        temperature: 0 decodes greedily (then n must be 1); > 0 samples with noise seeded by
            ``seed`` and each example's uid, so evaluating the same weights twice gives the same
            completions.
        top_p: Nucleus threshold of sampled evaluation.
        seed: Fixed seed of sampled evaluation (independent of the run's seed and step).
        pass_k: k values of pass@k, each in ``[1, n]``; None reports pass@1 and pass@n.
        max_new_tokens: Completion length limit.
        maj_k: k values of maj@k (`majority_at_k`), each in ``[1, n]``; None reports none. The
            ballots are the data module's ``canonical_answer`` of each sample.
    """

    def __init__(
        self,
        num_generations: int,
        temperature: float,
        top_p: float,
        seed: int,
        pass_k: list[int] | None,
        max_new_tokens: int,
        maj_k: list[int] | None = None,
    ):
        self.pass_k = check_eval_settings(num_generations, temperature, top_p, pass_k, maj_k)
        self.maj_k = sorted(set(maj_k or []))
        self.num_generations = num_generations
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.max_new_tokens = max_new_tokens

    @property
    def score_names(self) -> list[str]:
        """Per-example scores each evaluation step returns (`example_scores`)."""
        return ["accuracy", "reward", *(f"pass@{k}" for k in self.pass_k), *(f"maj@{k}" for k in self.maj_k)]

    @property
    def settings(self) -> dict:
        """The settings as the strategy options name them (recorded with ``zoo validate`` / ``zoo
        test``)."""
        return {
            "eval_num_generations": self.num_generations,
            "eval_temperature": self.temperature,
            "eval_top_p": self.top_p,
            "eval_seed": self.seed,
            "eval_pass_k": self.pass_k,
            "eval_maj_k": self.maj_k,
            "max_new_tokens": self.max_new_tokens,
        }

    def step(self, module, batch: list) -> dict:
        """The completions of ``batch`` under ``module`` (a `zoo.PolicyModule`), their rewards from
        the trainer's data module and their per-example scores."""
        n = self.num_generations
        datamodule = module.trainer.datamodule
        options = {"greedy": True} if self.temperature == 0 else {"temperature": self.temperature, "top_p": self.top_p}
        rollout = sample_batch(
            module,
            datamodule,
            batch,
            n,
            max_new_tokens=self.max_new_tokens,
            seed=None if self.temperature == 0 else self.seed,
            any_rank=getattr(module.trainer.strategy, "any_rank", bool),
            **options,
        )
        rewards = verify(datamodule, rollout)
        ballots = None
        if self.maj_k:
            data.check_data(datamodule, [data.BALLOTS])
            ballots = [datamodule.canonical_answer(rollout.example(i), t) for i, t in enumerate(rollout.completions)]
        scores = example_scores(rewards, n, self.pass_k, ballots, self.maj_k)
        return {"rollout": rollout, "rewards": rewards, "scores": scores}
