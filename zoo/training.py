"""The manual-step base every zoo strategy shares (GRPO, SFT and the hybrids): gradient accumulation
taken over from Lightning, micro-batches planned alike on every rank, backward passes that
synchronise gradients once per optimizer step, the optimizer step itself, checkpoints read as data,
and held-out evaluation.

A strategy adds `ManualStep` to one of Lightning's strategies (``class SFTStrategy(OneDevice,
SFTMixin, SingleDeviceStrategy)`` with ``SFTMixin(ManualStep)``) and writes its training step with
the public methods here: `steps_now`, `plan`, `forward`, `backward_pass`, `step_optimizer`
(Lightning's own ``backward`` and ``optimizer_step`` keep their meaning).
"""

from __future__ import annotations

import logging
import math
import re
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
from lightning.pytorch.strategies import ModelParallelStrategy, ParallelStrategy
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor

from zoo.checkpoints import check_index, read_checkpoint
from zoo.data import check_data
from zoo.evaluation import Evaluation
from zoo.metrics import MetricMeans
from zoo.rollout.progress import Every
from zoo.rollout.turns import MultiTurnRollout

log = logging.getLogger(__name__)

#: One micro-batch: the row indices it runs and its weight (0 for a padding pass that only keeps
#: ranks in step).
MicroBatch = tuple[Tensor, float]


#: Seconds of a step's training passes between ``[zoo]`` lines saying how many are done.
PROGRESS_EVERY = 10.0


class ManualStep:
    """Manual optimisation shared by every zoo strategy. The strategy's own ``__init__`` sets
    ``micro_batch_size``, ``max_grad_norm`` and ``evaluation`` (`zoo.evaluation.Evaluation`), and
    may set ``max_tokens_per_micro_batch`` (`check_micro_batching`)."""

    micro_batch_size: int | None
    max_tokens_per_micro_batch: int | None = None
    max_grad_norm: float | None
    evaluation: Evaluation

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.accumulate_grad_batches = 1
        self._passes, self._progress = 0, Every(PROGRESS_EVERY)

    # ---- Lightning's seams ----------------------------------------------------------------------
    def connect(self, model) -> None:
        """Takes over ``trainer.accumulate_grad_batches``: Lightning refuses it under manual
        optimization, so the strategy counts the window itself (`steps_now`) and steps once per
        window."""
        super().connect(model)
        trainer = model._trainer
        if trainer is not None and trainer.accumulate_grad_batches > 1:
            if reason := self.accumulation_refused():
                raise ValueError(reason)
            self.accumulate_grad_batches = trainer.accumulate_grad_batches
            trainer.accumulate_grad_batches = 1

    def accumulation_refused(self) -> str | None:
        """Why this strategy's settings cannot accumulate gradients over several batches; None when
        they can."""
        return None

    def setup(self, trainer) -> None:
        """Checks once, before any step, that the data module has what this strategy calls
        (`data_needs`)."""
        super().setup(trainer)
        check_data(trainer.datamodule, self.data_needs())

    def data_needs(self) -> list:
        """The `zoo.data` needs this strategy has of its data module (`zoo.data.Need`)."""
        return []

    def load_checkpoint(self, checkpoint_path, weights_only: bool | None = None) -> dict:
        """Checkpoints are always read as data: a file with ``weights_only=True``, a sharded folder
        once its index passes `zoo.checkpoints.check_index` (torch unpickles it). A strategy that
        does not shard (one device, DDP) reads a sharded folder consolidated, so a run of several
        FSDP2 processes resumes on one."""
        if Path(checkpoint_path).is_dir():
            check_index(checkpoint_path)
            if not isinstance(self, ModelParallelStrategy):
                checkpoint = read_checkpoint(checkpoint_path)
                count = sum(1 for key in checkpoint if re.fullmatch(r"optimizer_\d+", key))
                checkpoint["optimizer_states"] = [checkpoint.pop(f"optimizer_{i}") for i in range(count)]
                return checkpoint
        return super().load_checkpoint(checkpoint_path, weights_only=True)

    def load_optimizer_state_dict(self, checkpoint: dict) -> None:
        """Optimizer states keyed by parameter name (a sharded checkpoint read consolidated) are
        matched to this optimizer's parameters by name; others load as Lightning loads them."""
        states = checkpoint.get("optimizer_states") or []
        if not any(isinstance(p, str) for s in states for g in s.get("param_groups", []) for p in g["params"]):
            return super().load_optimizer_state_dict(checkpoint)
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        for optimizer, state in zip(self.optimizers, states, strict=True):
            set_optimizer_state_dict(self.lightning_module, optimizer, state)

    def validation_step(self, batch: list, batch_idx: int) -> dict:
        """Held-out completions, their rewards and per-example scores
        (`zoo.evaluation.Evaluation`)."""
        return self.evaluation.step(self.lightning_module, batch)

    test_step = validation_step

    # ---- the pieces of a step -------------------------------------------------------------------
    def steps_now(self, batch_idx: int) -> bool:
        """Whether this batch ends a gradient accumulation window (always, without accumulation)."""
        last_of_epoch = batch_idx + 1 == self.lightning_module.trainer.num_training_batches
        return (batch_idx + 1) % self.accumulate_grad_batches == 0 or last_of_epoch

    def plan(self, rows: list[Tensor], rollouts: list | None = None) -> list[list[MicroBatch]]:
        """Micro-batches of each row set, padded so that every rank runs as many passes per set
        (each backward is a collective under DDP and FSDP2): one all-reduce for all. Each holds at
        most ``micro_batch_size`` rows and, when ``max_tokens_per_micro_batch`` is set and the
        sets' ``rollouts`` are given, rows packed by their real lengths (`pack_rows`; a policy that
        scores its micro-batches as one padding-free sequence, ``pack_sequences``, is charged its
        packed tokens)."""
        self._passes, self._progress = 0, Every(PROGRESS_EVERY)  # a window's training begins
        budget = self.max_tokens_per_micro_batch
        packed = bool(getattr(self.lightning_module, "pack_sequences", False))
        chunks = [
            micro_batches(r, self.micro_batch_size, budget, None if budget is None else row_lengths(rollout, r), packed)
            for r, rollout in zip(rows, rollouts or [None] * len(rows), strict=True)
        ]
        counts = torch.tensor([len(c) for c in chunks], device=self.root_device)
        counts = self.reduce(counts, reduce_op="max").tolist()  # [k], the same on every rank
        return [plan_micro_batches(c, r, int(n)) for c, r, n in zip(chunks, rows, counts, strict=True)]

    def forward(self, rollout, rows: Tensor, greedy: bool = False) -> dict[str, Tensor]:
        """The policy's differentiable scores of ``rows`` (`zoo.PolicyModule.training_step`; the
        greedy flags only when asked) through Lightning's wrapper (DDP / FSDP2), so the gradients it
        gives are synchronised."""
        asked = {"greedy": True} if greedy else {}  # a policy of one's own may not take the argument
        return super().training_step(rollout, rows, **asked)

    def backward_pass(self, loss: Tensor, last: bool) -> None:
        """Backward of ``loss``; gradients are synchronised over ranks only when ``last`` (the
        window's final pass), the others accumulate locally."""
        with self.sync_context(last):
            self.lightning_module.manual_backward(loss)
        self._passes += 1
        if self._progress.due():
            rank_zero_info(
                f"[zoo] training: {self._passes} forward and backward passes done, "
                f"{self._progress.elapsed:.0f} s into this update"
            )

    def sync_context(self, last: bool):
        """Skips the gradient all-reduce on every backward of the window but the last. It wraps the
        backward only: under manual optimization Lightning prepares DDP's reducer in the backward,
        not the forward."""
        if last or not isinstance(self, ParallelStrategy):
            return nullcontext()
        if isinstance(self, ModelParallelStrategy):  # FSDP2: no reduce-scatter on intermediate passes
            return no_gradient_sync(self.lightning_module.model)
        return self.block_backward_sync()

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (a collective when there are several)."""
        if self.world_size == 1:
            return flag
        return bool(self.reduce(torch.tensor(float(flag), device=self.root_device), reduce_op="sum") > 0)

    def step_optimizer(self, means: MetricMeans, prefix: str, scale: float = 1.0) -> bool:
        """Scale the gradients, clip, step the optimizer and the scheduler; returns whether the
        update was skipped. A non-finite norm (a non-finite loss or an overflow) skips it, so the
        weights and the moments stay as they were, but still counts as a step, so ``global_step``,
        schedules and sampling seeds stay aligned. The norm is of the synchronised gradients: every
        rank takes the same decision.

        Args:
            means: Takes ``<prefix>/grad_norm`` when the step is taken.
            prefix: Metric prefix, e.g. ``train/grpo``.
            scale: Factor applied to every gradient first (SFT's division by the window's token
                count).
        """
        module = self.lightning_module
        optimizer = module.optimizers()
        params = [p for p in module.parameters() if p.requires_grad]
        if scale != 1.0:
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(scale)
        clip = self.max_grad_norm if self.max_grad_norm is not None else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # a DTensor under FSDP2
        finite = math.isfinite(norm)
        if finite:
            means.add(f"{prefix}/grad_norm", norm)
        else:  # optimizers leave parameters without a gradient (and their state) untouched
            step = module.trainer.global_step
            log.warning("step %d: non-finite gradient norm (%s); the update is skipped", step, norm)
            optimizer.zero_grad(set_to_none=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler = module.lr_schedulers()
        if scheduler is not None:
            scheduler.step()
        return not finite


def check_micro_batching(micro_batch_size: int | None, max_tokens_per_micro_batch: int | None) -> None:
    """A one-line error for a micro-batch size or token budget below 1."""
    for name, value in (
        ("micro_batch_size", micro_batch_size),
        ("max_tokens_per_micro_batch", max_tokens_per_micro_batch),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1 or None, got {value}")


def plan_micro_batches(chunks: list[Tensor], rows: Tensor, count: int) -> list[MicroBatch]:
    """``chunks`` of ``rows`` with weight 1, padded to ``count`` chunks by chunks that re-run one
    row with weight 0: every rank must run as many forward and backward passes (each is a
    collective under DDP and FSDP2)."""
    plan = [(chunk, 1.0) for chunk in chunks]
    filler = rows[:1] if len(rows) else torch.zeros(1, dtype=torch.long)
    return plan + [(filler, 0.0)] * (count - len(plan))


def micro_batches(
    rows: Tensor, size: int | None, budget: int | None = None, lengths: Tensor | None = None, packed: bool = False
) -> list[Tensor]:
    """``rows`` cut into micro-batches: in order, ``size`` rows each (None: one chunk), or, with a
    token ``budget`` and the rows' ``lengths``, packed by length (`pack_rows`; ``packed``: the
    passes are padding-free sequences)."""
    if budget is not None and lengths is not None:
        return pack_rows(rows, lengths, budget, size, packed)
    return [chunk for chunk in torch.split(rows, size or max(len(rows), 1)) if len(chunk)]


def row_lengths(rollout, rows: Tensor) -> Tensor:
    """Prompt tokens (padding left out) and completion columns (through the last counted token, at
    least 1) of ``rows`` of ``rollout``, ``[n, 2]``: what a trimmed scoring pass holds of each row
    (`zoo.rollout.Rollout.model_inputs`)."""
    if isinstance(rollout, MultiTurnRollout):  # each turn's pass reads the conversation so far
        prompt = rollout.prompt_tokens()[rows.cpu()]  # [n]
    else:
        prompt = rollout.prompts.tensors["attention_mask"].sum(1)[rows // rollout.num_generations]  # [n]
    counted = rollout.completion_mask[rows]  # [n, L]
    positions = torch.arange(1, counted.shape[1] + 1, device=counted.device)  # [L]
    completion = (counted * positions).amax(1).clamp(min=1)  # [n]
    return torch.stack([prompt.to(completion.device), completion], dim=1).long().cpu()


def pack_rows(
    rows: Tensor, lengths: Tensor, budget: int, size: int | None = None, packed: bool = False
) -> list[Tensor]:
    """First-fit decreasing: rows longest first, each into the first micro-batch that stays within
    ``budget`` tokens of its scoring pass and ``size`` rows; a row longer than the budget alone in
    one. A padded pass holds rows x (longest prompt + longest completion) of the micro-batch, a
    ``packed`` one (`zoo.rollout.packing`) the sum of its rows' lengths.

    Args:
        rows: Row indices ``[n]``.
        lengths: Prompt and completion tokens of each row ``[n, 2]`` (`row_lengths`).
        budget: ``max_tokens_per_micro_batch``.
        size: ``micro_batch_size`` (None: no cap on rows).
        packed: Whether the passes are padding-free sequences.

    Returns:
        The micro-batches' row indices, each in ascending order; the first holds the longest row.
    """
    bins: list[list[int]] = []  # positions into ``rows``
    widths: list[tuple[int, int]] = []  # each bin's longest prompt and completion
    prompt, completion = lengths[:, 0].tolist(), lengths[:, 1].tolist()
    totals: list[int] = []  # each bin's tokens, packed
    for i in sorted(range(len(rows)), key=lambda i: (-(prompt[i] + completion[i]), i)):
        for b, (p, c) in enumerate(widths):
            grown = (max(p, prompt[i]), max(c, completion[i]))
            cost = totals[b] + prompt[i] + completion[i] if packed else (len(bins[b]) + 1) * sum(grown)
            if (size is None or len(bins[b]) < size) and cost <= budget:
                bins[b].append(i)
                widths[b] = grown
                totals[b] += prompt[i] + completion[i]
                break
        else:
            if prompt[i] + completion[i] > budget:
                _log_over_budget(prompt[i] + completion[i], budget)
            bins.append([i])
            widths.append((prompt[i], completion[i]))
            totals.append(prompt[i] + completion[i])
    return [rows[sorted(b)] for b in bins]


_over_budget_logged: list[bool] = []


def _log_over_budget(length: int, budget: int) -> None:
    """Says once per process that a row longer than the token budget runs alone."""
    if not _over_budget_logged:
        _over_budget_logged.append(True)
        log.warning(
            "a row of %d tokens is longer than max_tokens_per_micro_batch (%d): it runs alone in its "
            "micro-batch (logged once)",
            length,
            budget,
        )


@contextmanager
def no_gradient_sync(model):
    """FSDP2 gradient synchronisation off for the duration (gradients accumulate locally)."""
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)
