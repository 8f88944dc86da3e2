"""GRPO as a Lightning Strategy: one training step = sample, verify, advantages, then policy
updates.

`GRPOMixin` holds the algorithm; `GRPOStrategy` (one device), `GRPODDPStrategy` (DDP) and
`GRPOFSDPStrategy` (FSDP2) add it to Lightning's strategies, so launching, precision, checkpointing
and gradient sync stay Lightning's.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy, SingleDeviceStrategy
from torch import Tensor

from zoo import data
from zoo.devices import FSDP2, OneDevice
from zoo.evaluation import Evaluation
from zoo.grpo import dynamic
from zoo.grpo import functional as F
from zoo.grpo.guidance import Guidance
from zoo.grpo.updates import mini_batches, set_divisors
from zoo.grpo.window import (
    ScoredRollout,
    WindowBatch,
    add_window_metrics,
    last_chunk,
    no_grad_log_probs,
    window_advantages,
    window_batch,
)
from zoo.metrics import MetricMeans
from zoo.training import ManualStep, check_micro_batching


class GRPOMixin(ManualStep):
    """Group Relative Policy Optimization over a `zoo.PolicyModule` and a data module with
    ``verify``.

    Args:
        num_generations: G, completions sampled per prompt (>= 2: advantages compare them).
        temperature: Sampling temperature; log-probs are computed at the same temperature.
        top_p: Nucleus sampling threshold (1.0 samples the full distribution). Log-probs (importance
            ratio, KL, entropy) are those of the untruncated tempered softmax, as in TRL and verl:
            with ``top_p < 1`` they are not the probabilities of the truncated distribution the
            tokens were drawn from.
        max_new_tokens: Completion length limit.
        loss_type: A key of `zoo.grpo.functional.LOSSES`: ``grpo`` (mean of sequence means),
            ``dr_grpo`` (token sum over rows * ``max_new_tokens``), ``dapo`` (token mean), ``bnpo``
            (token mean of each batch; under accumulation the mean of the batches' means), ``gspo``
            (sequence-level ratio, mean of sequence means), ``gpg`` (no ratio, no clipping; token
            mean; needs ``num_iterations`` 1); or a loss of your own by class path (a
            `zoo.grpo.functional.Loss` subclass). Every count is over all ranks and (except
            ``bnpo``'s) over the accumulation window.
        scale_rewards: Advantage scaling: ``group`` std, ``batch`` std (over all ranks and the
            accumulation window), ``none``, or ``gpg``: no std, GPG's ``alpha = B / (B - M)``
            (B groups, M of them with equal rewards, both counted over all ranks and the
            accumulation window; at most 20).
        epsilon: Clip range below 1 of the importance ratio.
        epsilon_high: Clip range above 1 (DAPO clip-higher); None uses ``epsilon``.
        clip_ratio_c: Dual-clip PPO (verl's and EasyR1's ``clip_ratio_c``, 3.0 there): for a
            negative advantage the per-token loss is bounded by ``-clip_ratio_c * A`` (> 1); None
            disables. Tokens at the bound count in ``train/grpo/clip_frac``.
        beta: KL coefficient against the frozen initial policy; 0 loads no reference model.
        kl_estimator: ``k1``, ``k2`` or ``k3`` (low variance, non-negative).
        beta_schedule: ``constant``, or ``linear`` / ``cosine`` decay of ``beta`` to 0 at
            ``max_steps`` (logged as ``train/grpo/beta``).
        kl_bias_correction: Multiply each token's KL estimate by its importance ratio pi / pi_old
            (TRL's ``use_bias_correction_kl``): the samples come from pi_old, and the ratio's
            gradient adds the score-function term, so the gradient estimates that of KL(pi ||
            pi_ref) even on-policy.
        num_iterations: Passes over each rollout (mu; verl's ``ppo_epochs``), each of
            ``mini_batches`` optimizer steps; > 1 reuses the samples with importance ratios.
        mini_batches: Optimizer steps per pass over a rollout (verl's ``train_batch_size /
            ppo_mini_batch_size``, EasyR1's ``rollout_batch_size / global_batch_size``): each
            rank's kept groups of the rollout are split in order into this many shares of whole
            groups, as even as possible, and share ``j`` of every rank is mini-batch ``j``.
            Advantages are computed once over the whole rollout, importance ratios are against
            the sampling policy (old log-probs computed once, before the first update), and each
            mini-batch is normalised as a batch of its own (its kept rows and tokens over all
            ranks, as TRL normalises each optimizer step of a generation batch). Every optimizer
            step counts in ``global_step`` (``max_steps``, LR schedulers), as in TRL; one whose
            mini-batch holds no group on any rank leaves the weights as they are.
        mask_truncated: Leave the tokens of completions that hit ``max_new_tokens`` without an EOS
            out of the loss; the rows still count in the row normalisers of ``grpo``, ``gspo`` and
            ``dr_grpo`` (as in TRL).
        filter_zero_variance: Leave groups whose rewards are all equal out of the loss and its
            normaliser.
        refill_rounds: DAPO dynamic sampling: while the global batch holds fewer groups with unequal
            rewards than it has prompts, sample up to this many more batches of prompts (the data
            module's ``refill``) and train on the first that many such groups; a batch that hits the
            cap trains on those it holds (``train/dynamic/*`` count rounds, groups drawn and kept).
            0 disables.
        micro_batch_size: Completions per forward/backward pass (bounds memory, same update); None
            does all at once.
        max_tokens_per_micro_batch: Token budget of a forward/backward pass: the kept rows are
            packed by their real lengths (prompt + completion, padding trimmed), longest first, so
            that rows x (longest prompt + longest completion) of each pass stays within it, or,
            when the policy packs its passes (``pack_sequences``), the sum of their lengths (a
            longer row runs alone); with ``micro_batch_size`` both bounds hold. Same update; None
            counts rows only.
        entropy_coef: Weight of a token-entropy bonus (helps tiny models keep exploring; 0
            disables). It is added per token and aggregated like the policy loss, so each loss
            type's normaliser divides it too (for ``dr_grpo`` it is the entropy sum over rows *
            ``max_new_tokens``).
        max_grad_norm: Gradient clipping norm per optimizer step; None disables.
        guidance: A supervised+RL hybrid (`zoo.hybrid`): ``zoo.hybrid.SRFT``, ``zoo.hybrid.LUFFY``
            (a demonstration joins each group), ``zoo.hybrid.CHORD`` (a scheduled SFT term on
            demonstrations kept out of the groups), ``zoo.hybrid.Entropulse`` (SFT phases when
            entropy collapses); or ``zoo.grpo.CARE`` (GRPO-CARE's consistency bonus).
        eval_num_generations: n, completions per held-out example in ``validate`` / ``test`` (and
            the validations during ``fit``); each is one row of the predictions file.
        eval_temperature: 0 decodes greedily (then n must be 1: greedy samples are identical); > 0
            samples with noise seeded by ``eval_seed`` and each example's uid, so evaluating the
            same weights twice gives the same completions.
        eval_top_p: Nucleus threshold of sampled evaluation.
        eval_seed: Fixed seed of sampled evaluation (independent of the run's seed and step).
        eval_pass_k: k values of the unbiased pass@k estimate (``val/pass@<k>``,
            ``val/<task>/pass@<k>``), each in ``[1, n]``; a sample is correct when its ``accuracy``
            reward part is 1. None reports pass@1 and pass@n.
        eval_maj_k: k values of maj@k (``val/maj@<k>``, ``val/<task>/maj@<k>``), each in ``[1,
            n]``: the ``accuracy`` of the answer most of the first k samples state (ballots: the
            task's canonical parsed answer, so ``90`` and ``90 degrees`` are one vote; a tie goes to
            the answer stated first). None reports none.
        **kwargs: Arguments of the Lightning strategy.
    """

    def __init__(
        self,
        num_generations: int = 8,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        loss_type: str | F.Loss = "grpo",
        scale_rewards: str = "group",
        epsilon: float = 0.2,
        epsilon_high: float | None = None,
        clip_ratio_c: float | None = None,
        beta: float = 0.0,
        kl_estimator: str = "k3",
        beta_schedule: str = "constant",
        kl_bias_correction: bool = False,
        num_iterations: int = 1,
        mini_batches: int = 1,
        mask_truncated: bool = False,
        filter_zero_variance: bool = False,
        refill_rounds: int = 0,
        micro_batch_size: int | None = None,
        max_tokens_per_micro_batch: int | None = None,
        entropy_coef: float = 0.0,
        max_grad_norm: float | None = 1.0,
        guidance: Guidance | None = None,
        eval_num_generations: int = 1,
        eval_temperature: float = 0.0,
        eval_top_p: float = 1.0,
        eval_seed: int = 0,
        eval_pass_k: list[int] | None = None,
        eval_maj_k: list[int] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if num_generations < 2:
            raise ValueError(f"num_generations must be >= 2, got {num_generations}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        loss = F.find_loss(loss_type)  # an unknown name is a one-line error
        if scale_rewards not in F.SCALES:
            raise ValueError(f"scale_rewards must be one of {F.SCALES}, got {scale_rewards!r}")
        if kl_estimator not in F.KL_ESTIMATORS:
            raise ValueError(f"kl_estimator must be one of {F.KL_ESTIMATORS}")
        if beta_schedule not in F.SCHEDULES:
            raise ValueError(f"beta_schedule must be one of {F.SCHEDULES}")
        if beta < 0 or epsilon < 0:
            raise ValueError("beta and epsilon must be >= 0")
        if num_iterations < 1 or mini_batches < 1:
            raise ValueError(f"num_iterations and mini_batches must be >= 1, got {num_iterations}, {mini_batches}")
        if (num_iterations > 1 or mini_batches > 1 or clip_ratio_c is not None) and not loss.off_policy:
            raise ValueError(
                f"loss_type {loss_type!r} has no importance ratio, so num_iterations or mini_batches > 1 would "
                "train on stale samples as if they were on-policy (and clip_ratio_c has no ratio to bound); "
                "use a clipped loss type"
            )
        if clip_ratio_c is not None and clip_ratio_c <= 1:
            raise ValueError(f"clip_ratio_c must be > 1 (or None), got {clip_ratio_c}")
        check_micro_batching(micro_batch_size, max_tokens_per_micro_batch)
        if refill_rounds < 0:
            raise ValueError(f"refill_rounds must be >= 0, got {refill_rounds}")
        if refill_rounds and guidance:
            raise ValueError(
                "refill_rounds (dynamic sampling) cannot be combined with a guidance (zoo.hybrid) yet: "
                "a hybrid's rows would join the batch's own groups but not its refills"
            )
        self.num_generations = num_generations
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.loss_type = loss_type
        self.scale_rewards = scale_rewards
        self.epsilon = epsilon
        self.epsilon_high = epsilon_high
        self.clip_ratio_c = clip_ratio_c
        self.beta = beta
        self.kl_estimator = kl_estimator
        self.beta_schedule = beta_schedule
        self.kl_bias_correction = kl_bias_correction
        self.num_iterations = num_iterations
        self.mini_batches = mini_batches
        self.mask_truncated = mask_truncated
        self.filter_zero_variance = filter_zero_variance
        self.micro_batch_size = micro_batch_size
        self.max_tokens_per_micro_batch = max_tokens_per_micro_batch
        self.refill_rounds = refill_rounds
        self.entropy_coef = entropy_coef
        self.max_grad_norm = max_grad_norm
        self._window: list[list[ScoredRollout]] = []  # scored batches (with refill rounds) of the accumulation window
        self.evaluation = Evaluation(
            eval_num_generations, eval_temperature, eval_top_p, eval_seed, eval_pass_k, max_new_tokens, eval_maj_k
        )
        self.guidance = guidance or Guidance()
        self.guidance.attach(self)

    def accumulation_refused(self) -> str | None:
        """With accumulation the strategy samples and scores that many batches and trains on them as
        on one batch holding all their groups, with one optimizer step: a rollout cannot also serve
        several steps."""
        if self.num_iterations > 1 or self.mini_batches > 1:
            return (
                "num_iterations or mini_batches > 1 uses each rollout for several optimizer steps; it cannot be "
                "combined with accumulate_grad_batches (raise the data module's batch_size instead)"
            )
        return None

    def setup(self, trainer) -> None:
        """Refuses a hybrid (``guidance``) on a data module with tool tasks before any step: its
        expert rows and supervised passes are single-turn, so they would teacher-force a transcript
        as one turn and join it to multi-turn groups."""
        fitting = getattr(getattr(trainer, "state", None), "fn", None) == "fit"
        if fitting and type(self.guidance) is not Guidance and getattr(trainer.datamodule, "uses_tools", False):
            raise ValueError(
                f"guidance {type(self.guidance).__name__} cannot train a data module with tool tasks (multi-turn "
                "rollouts) yet; train them with plain GRPO, or SFT on their demonstrations first (docs/tools.md)"
            )
        super().setup(trainer)

    def data_needs(self) -> list[data.Need]:
        needs = [data.REWARDS, *self.guidance.data_needs()]
        return needs + [data.REFILLS] if self.refill_rounds else needs

    # ---- the step -------------------------------------------------------------------------------
    def training_step(self, batch: list, batch_idx: int) -> dict:
        """One GRPO step: sample and verify, then (at a window's last batch) train; returns the
        metrics."""
        # a hybrid in a supervised phase trains this step itself
        if (supervised := self.guidance.step(self, batch, batch_idx)) is not None:
            return supervised
        means = MetricMeans()
        start = time.perf_counter()
        # sample and verify the batch, then its refill rounds (dynamic sampling)
        key = self.lightning_module.trainer.global_step * self.accumulate_grad_batches + len(self._window)
        drawn = dynamic.draw(self, batch, key, means)
        rollout = drawn[0].rollout
        rewards = drawn[0].rewards
        means.add_rewards("train", [rollout.example(n).task for n in range(rollout.size)], rewards)
        # the window keeps every batch until its last: then they train as one batch
        self._window.append([self._guided(drawn[0], means), *drawn[1:]])
        scored = time.perf_counter()
        out = {"rollout": rollout, "rewards": rewards}
        if self.steps_now(batch_idx):
            window = self._window
            self._window = []
            out["loss"] = self._train_window(window, means)
        done = time.perf_counter()
        sample_s = sum(d.sample_s for d in drawn)
        means.add("perf/sample_s", sample_s)
        means.add("perf/score_s", scored - start - sample_s)
        means.add("perf/train_s", done - scored)
        means.add("perf/tokens_per_s", sum(d.tokens for d in drawn) / (done - start))
        return out | {"metrics": means.result()}

    def _guided(self, drawn: ScoredRollout, means: MetricMeans) -> ScoredRollout:
        """The batch's rollout as the guidance (a hybrid, `zoo.grpo.guidance`) extends it: G rows a
        prompt."""
        rollout, rewards = self.guidance.extend(self, drawn.rollout, drawn.rewards, means)
        return replace(drawn, rollout=rollout, rewards=rewards, totals=dynamic.totals(rewards, len(rollout.examples)))

    def _train_window(self, window: list[list[ScoredRollout]], means: MetricMeans) -> Tensor:
        """``num_iterations`` passes over the window, each of ``mini_batches`` optimizer steps; with
        one mini-batch each step is the update of one batch holding all the window's groups, on any
        number of ranks. Returns the mean loss of the steps."""
        steps = self._steps(window)
        total = torch.zeros((), device=self.root_device)
        skipped = 0
        for _ in range(self.num_iterations):
            for pieces in steps:
                if self.beta > 0 and self.beta_schedule != "constant":
                    means.add("train/grpo/beta", self._beta())
                self.guidance.prepare(self, pieces)
                total += self._update(pieces, means)
                skipped += self.step_optimizer(means, "train/grpo")
        total /= self.num_iterations * len(steps)
        means.add("train/grpo/skipped_steps", skipped)
        means.add("train/grpo/loss", total.item())
        # every step's pieces hold the whole rollouts and advantages
        add_window_metrics(means, steps[0], [d.totals for batch in window for d in batch])
        return total

    def _update(self, pieces: list[WindowBatch], means: MetricMeans) -> Tensor:
        """The forward and backward passes of one optimizer step over ``pieces`` in their
        micro-batches; returns the step's loss."""
        total = torch.zeros((), device=self.root_device)
        final = last_chunk(pieces)
        for p, piece in enumerate(pieces):
            for i, (chunk, live) in enumerate(piece.plan):
                out = self.forward(piece.rollout, chunk)
                loss = self._loss(out, piece, chunk, means if live else None)
                self.backward_pass(loss * live, last=(p, i) == final)
                total += loss.detach() * live
        return total

    def _steps(self, window: list[list[ScoredRollout]]) -> list[list[WindowBatch]]:
        """The window's mini-batches (`zoo.grpo.updates.mini_batches`), each a piece of every
        rollout with its advantages, kept rows, mask, micro-batch plan, loss divisor and the old /
        reference log-probs it needs (all computed before the first update)."""
        drawn = [d for batch in window for d in batch]
        advantages = self._advantages(drawn)
        parts = [
            window_batch(d, adv.to(self.root_device), self.filter_zero_variance, self.mask_truncated)
            for d, adv in zip(drawn, advantages, strict=True)
        ]
        steps = mini_batches(parts, self.mini_batches)
        pieces = [piece for step in steps for piece in step]
        counts = self.reduce(
            torch.tensor([piece.counts for piece in pieces], device=self.root_device), reduce_op="sum"
        )  # [S * P, 2] over all ranks
        sizes = [len(batch) for batch in window]
        set_divisors(steps, counts.cpu(), self.loss_type, sizes, self.max_new_tokens, self.world_size)
        stale = self.num_iterations > 1 or self.mini_batches > 1  # some step trains after an update
        plans = self.plan([piece.rows for piece in pieces], [piece.rollout for piece in pieces])
        for piece, plan in zip(pieces, plans, strict=True):
            piece.plan = plan
            if stale:
                piece.old = no_grad_log_probs(self.lightning_module, piece.rollout, plan, reference=False)
            if self.beta > 0:
                piece.ref = no_grad_log_probs(self.lightning_module, piece.rollout, plan, reference=True)
        return steps

    def _advantages(self, drawn: list[ScoredRollout]) -> list[Tensor]:
        """``[N]`` advantages of each rollout; ``batch`` scaling uses the std (``gpg`` the alpha)
        over the groups of the window's batches on every rank."""
        totals = [d.totals for d in drawn]
        if self.scale_rewards not in F.GLOBAL_SCALES:
            return window_advantages(totals, self.scale_rewards)
        mine = torch.cat([torch.cat([d.totals, d.members[:, None].to(d.totals)], dim=1) for d in drawn])  # [R, G+1]
        everyone = self.all_gather(mine.to(self.root_device)).reshape(-1, mine.shape[1]).cpu()  # [W*R, G+1]
        return window_advantages(
            totals,
            self.scale_rewards,
            everyone[:, :-1],
            offset=self.global_rank * len(mine),
            members=everyone[:, -1].bool(),
        )

    def _loss(self, out: dict, part: WindowBatch, rows: Tensor, means: MetricMeans | None) -> Tensor:
        """This rank's share of the window's loss from the rows ``rows`` of ``part``."""
        logps, entropy = out["logps"], out["entropy"]  # [n, L]
        m = part.mask[rows].to(logps.device)
        old_logps = logps.detach() if part.old is None else part.old[rows]
        per_token, clipped = F.per_token_loss(
            logps,
            old_logps,
            part.advantages[rows],
            m,
            self.loss_type,
            self.epsilon,
            self.epsilon_high,
            self.clip_ratio_c,
        )
        per_token, extra = self.guidance.adjust(self, part, rows, out, per_token, means)
        if part.ref is not None:
            kl = F.kl_penalty(logps, part.ref[rows], self.kl_estimator)
            if self.kl_bias_correction:  # importance weight of the samples, which came from pi_old
                kl = kl * (logps - old_logps).exp()
            per_token = per_token + self._beta() * kl
        if self.entropy_coef:
            per_token = per_token - self.entropy_coef * entropy
        if means is not None:
            tokens = float(m.sum().clamp(min=1))
            means.add("train/grpo/entropy", float((entropy.detach() * m).sum()) / tokens, tokens)
            means.add("train/grpo/clip_frac", float(clipped.sum()) / tokens, tokens)
            if part.ref is not None:
                means.add("train/grpo/kl", float((kl.detach() * m).sum()) / tokens, tokens)
        return F.aggregate(per_token, m, self.loss_type, part.divisor) + extra

    def _beta(self) -> float:
        trainer = self.lightning_module.trainer
        progress = trainer.global_step / trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else 0.0
        return F.scheduled(self.beta, self.beta_schedule, progress)


class GRPOStrategy(OneDevice, GRPOMixin, SingleDeviceStrategy):
    """GRPO on one device (CPU or one GPU).

    Args:
        device: Device to train on; None takes the trainer's accelerator's first device.
        **kwargs: GRPO settings (see `GRPOMixin`) and `SingleDeviceStrategy` arguments.
    """

    parallel = "zoo.grpo.GRPODDPStrategy"


class GRPODDPStrategy(GRPOMixin, DDPStrategy):
    """GRPO over DistributedDataParallel: each rank samples its own prompts, gradients are
    all-reduced.

    Args:
        **kwargs: GRPO settings (see `GRPOMixin`) and `DDPStrategy` arguments
            (``process_group_backend``, ``find_unused_parameters``, ``start_method``, ...).
    """


class GRPOFSDPStrategy(FSDP2, GRPOMixin, ModelParallelStrategy):
    """GRPO over FSDP2: parameters, gradients and optimizer states sharded across all ranks
    (Lightning's `ModelParallelStrategy` with a data-parallel mesh over every process; the policy
    shards its blocks in ``configure_model``). Generation gathers the parameters once per rollout.
    Checkpoints are distributed (a folder of shards) and load on any number of processes.

    Args:
        param_dtype: Dtype the parameters are gathered in for compute (e.g. ``bfloat16`` over fp32
            shards); None computes in the parameters' own dtype.
        reduce_dtype: Dtype gradients are reduced in (with ``param_dtype`` set); None uses
            ``param_dtype``.
        **kwargs: GRPO settings (see `GRPOMixin`) and `ModelParallelStrategy` arguments
            (``save_distributed_checkpoint``, ``process_group_backend``, ``timeout``).
    """
