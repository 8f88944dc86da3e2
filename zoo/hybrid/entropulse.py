"""Entropulse (Lai et al. 2025, "ComputerRL: Scaling End-to-End Online Reinforcement Learning for
Computer Use Agents", arXiv 2508.14040): RL until the policy's entropy collapses, then SFT on the
policy's own successful rollouts of the RL phase (which raises entropy again), then RL again.

`Schedule` is the switching logic (pure Python); `Entropulse` runs it inside a GRPO strategy.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from torch import Tensor

from zoo.grpo.guidance import Guidance
from zoo.hybrid.supervised import sft_passes
from zoo.metrics import MetricMeans
from zoo.sft.demonstrations import teacher_forced


@dataclass
class Schedule:
    """Which phase each step trains in: RL until the mean entropy of the last ``window`` RL steps is
    below ``threshold``, then ``sft_steps`` SFT steps, then RL again with an empty window (so the
    next SFT phase needs ``window`` new RL steps).

    Attributes:
        threshold: Entropy (nats per token) below which the window counts as collapsed.
        window: RL steps the mean is taken over.
        sft_steps: Steps of each SFT phase.
        history: Entropies of the RL steps since the last SFT phase (the last ``window``).
        sft_left: SFT steps still to run in the current phase.
        phases: SFT phases started so far.
    """

    threshold: float
    window: int
    sft_steps: int
    history: list[float] = field(default_factory=list)
    sft_left: int = 0
    phases: int = 0

    def next_phase(self, entropy: float | None, ready: bool = True) -> str:
        """``"rl"`` or ``"sft"`` for the coming step.

        Args:
            entropy: Mean token entropy of the last step if it was an RL step, None otherwise (an
                SFT step, the first step, or an RL step with no counted token).
            ready: Whether an SFT phase can run (every rank holds a successful rollout); a collapsed
                window waits until it can.
        """
        if self.sft_left:
            self.sft_left -= 1
            return "sft"
        if entropy is not None:
            self.history = [*self.history, entropy][-self.window :]
        if ready and len(self.history) == self.window and statistics.fmean(self.history) < self.threshold:
            self.history, self.sft_left, self.phases = [], self.sft_steps - 1, self.phases + 1
            return "sft"
        return "rl"


class Successes:
    """The successful completions of recent examples (the SFT set of an Entropulse phase): per
    example, its distinct successful completions; at most ``size`` examples, the oldest dropped
    first."""

    def __init__(self, size: int):
        self.size = size
        self._by_example: OrderedDict[str, tuple[object, list[str]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_example)

    def add(self, example, completion: str) -> None:
        key = example.uid or f"{example.task}:{example.prompt_text}"
        _, texts = self._by_example.setdefault(key, (example, []))
        self._by_example.move_to_end(key)
        if completion not in texts:
            texts.append(completion)
        while len(self._by_example) > self.size:
            self._by_example.popitem(last=False)

    def draw(self, k: int, rng: random.Random) -> tuple[list, list[str]]:
        """``k`` examples drawn with replacement, each with one of its successes at random
        (ComputerRL draws a random successful trajectory per task)."""
        chosen = rng.choices(list(self._by_example.values()), k=k)
        return [example for example, _ in chosen], [rng.choice(texts) for _, texts in chosen]


def supervised_update(strategy, rollout, means: MetricMeans) -> Tensor:
    """One SFT optimizer step on a teacher-forced rollout: the token-mean NLL over every rank, in
    the strategy's micro-batches, clipped and stepped as GRPO steps are (`zoo.training.ManualStep`).
    Returns this rank's share of the loss."""
    total, _ = sft_passes(strategy, rollout)
    skipped = strategy.step_optimizer(means, "train/grpo")
    means.add("train/grpo/skipped_steps", float(skipped))
    return total


class Entropulse(Guidance):
    """Alternate RL and SFT phases against entropy collapse (ComputerRL's Entropulse).

    During RL every completion whose reward's ``accuracy`` part is at least ``success`` is kept (per
    example, its distinct successful completions; the last ``buffer_size`` examples). When the mean
    token entropy of the sampled completions (``train/grpo/entropy``, over all ranks) stays below
    ``threshold`` over ``window`` RL steps, the next ``sft_steps`` steps are SFT steps: each draws
    as many kept examples as the batch holds (with replacement), one successful completion of each
    at random, and trains their token-mean NLL (teacher forcing, as `zoo.sft.SFTStrategy` does); the
    batch the data module gives is not used. Then RL resumes and the window starts over. A collapse
    waits while some rank holds no success. Logged: ``train/entropulse/{sft,phases,
    buffer,sft_loss}``; an SFT step's row holds no RL metrics (no sampling, no reward). The buffer
    and the phase are not checkpointed: a resumed run starts in RL with an empty buffer. Not
    combinable with ``accumulate_grad_batches`` (an SFT phase starts at any batch).

    Args:
        threshold: Entropy in nats per token (``train/grpo/entropy``) below which the RL window
            counts as collapsed.
        window: RL steps whose mean entropy is compared with ``threshold``.
        sft_steps: Optimizer steps of each SFT phase.
        success: Least ``accuracy`` reward part of a completion kept for SFT (1: fully right
            answers).
        buffer_size: Most examples whose successes are kept (the oldest are dropped first).
    """

    def __init__(
        self,
        threshold: float = 0.3,
        window: int = 10,
        sft_steps: int = 20,
        success: float = 1.0,
        buffer_size: int = 1024,
    ):
        if window < 1 or sft_steps < 1 or buffer_size < 1:
            raise ValueError(
                f"window, sft_steps and buffer_size must be >= 1, got {window}, {sft_steps}, {buffer_size}"
            )
        self.schedule = Schedule(threshold, window, sft_steps)
        self.success = success
        self.buffer = Successes(buffer_size)
        self._entropy = [0.0, 0.0]  # entropy sum and token count of the current RL step
        self._last = "rl"

    def step(self, strategy, batch: list, batch_idx: int) -> dict | None:
        if strategy.accumulate_grad_batches > 1:
            raise ValueError(
                "Entropulse cannot be combined with accumulate_grad_batches: an SFT phase may start "
                "at any batch of an accumulation window"
            )
        stats = torch.tensor([*self._entropy, float(len(self.buffer) == 0)], device=strategy.root_device)
        entropy_sum, tokens, empty = strategy.reduce(stats, reduce_op="sum").tolist()  # over every rank
        entropy = entropy_sum / tokens if self._last == "rl" and tokens > 0 else None
        self._entropy = [0.0, 0.0]
        self._last = self.schedule.next_phase(entropy, ready=empty == 0)
        return self._sft_step(strategy, batch) if self._last == "sft" else None

    def _sft_step(self, strategy, batch: list) -> dict:
        module = strategy.lightning_module
        means = MetricMeans()
        start = time.perf_counter()
        step = module.trainer.global_step
        rng = random.Random(f"{os.environ.get('PL_GLOBAL_SEED', 0)}:{step}:{strategy.global_rank}")
        examples, replies = self.buffer.draw(len(batch), rng)
        rollout, _ = teacher_forced(module, examples, replies, strategy.max_new_tokens)
        loss = supervised_update(strategy, rollout, means)
        means.add("train/entropulse/sft_loss", float(loss))
        self._log(means, sft=1.0)
        means.add("perf/train_s", time.perf_counter() - start)
        return {"loss": loss, "metrics": means.result()}

    def extend(self, strategy, rollout, rewards: list, means) -> tuple:
        for n, (reward, text) in enumerate(zip(rewards, rollout.completions, strict=True)):
            if reward.parts.get("accuracy", 0.0) >= self.success:
                self.buffer.add(rollout.example(n), text)
        self._log(means, sft=0.0)
        return rollout, rewards

    def adjust(self, strategy, part, rows: Tensor, out: dict, per_token: Tensor, means) -> tuple[Tensor, Tensor]:
        if means is not None:  # the entropy GRPO logs, summed here over the step's live passes
            m = part.mask[rows].to(per_token.device)
            self._entropy[0] += float((out["entropy"].detach() * m).sum())
            self._entropy[1] += float(m.sum())
        return per_token, torch.zeros((), device=per_token.device)

    def _log(self, means: MetricMeans, sft: float) -> None:
        means.add("train/entropulse/sft", sft)
        means.add("train/entropulse/phases", self.schedule.phases)
        means.add("train/entropulse/buffer", len(self.buffer))
