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
from torch import Tensor

from zoo.checkpoints import check_index, read_checkpoint
from zoo.data import check_data
from zoo.evaluation import Evaluation
from zoo.metrics import MetricMeans

log = logging.getLogger(__name__)

#: One micro-batch: the row indices it runs and its weight (0 for a padding pass that only keeps
#: ranks in step).
MicroBatch = tuple[Tensor, float]


class ManualStep:
    """Manual optimisation shared by every zoo strategy. The strategy's own ``__init__`` sets
    ``micro_batch_size``, ``max_grad_norm`` and ``evaluation`` (`zoo.evaluation.Evaluation`)."""

    micro_batch_size: int | None
    max_grad_norm: float | None
    evaluation: Evaluation

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.accumulate_grad_batches = 1

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

    def plan(self, rows: list[Tensor]) -> list[list[MicroBatch]]:
        """Micro-batches of each row set, at most ``micro_batch_size`` rows each, padded so that
        every rank runs as many passes per set (each backward is a collective under DDP and FSDP2):
        one all-reduce for all."""
        counts = torch.tensor([chunk_count(r, self.micro_batch_size) for r in rows], device=self.root_device)
        counts = self.reduce(counts, reduce_op="max").tolist()  # [k], the same on every rank
        return [plan_micro_batches(r, self.micro_batch_size, int(c)) for r, c in zip(rows, counts, strict=True)]

    def forward(self, rollout, rows: Tensor) -> dict[str, Tensor]:
        """The policy's differentiable scores of ``rows`` (`zoo.PolicyModule.training_step`) through
        Lightning's wrapper (DDP / FSDP2), so the gradients it gives are synchronised."""
        return super().training_step(rollout, rows)

    def backward_pass(self, loss: Tensor, last: bool) -> None:
        """Backward of ``loss``; gradients are synchronised over ranks only when ``last`` (the
        window's final pass), the others accumulate locally."""
        with self.sync_context(last):
            self.lightning_module.manual_backward(loss)

    def sync_context(self, last: bool):
        """Skips the gradient all-reduce on every backward of the window but the last. It wraps the
        backward only: under manual optimization Lightning prepares DDP's reducer in the backward,
        not the forward."""
        if last or not isinstance(self, ParallelStrategy):
            return nullcontext()
        if isinstance(self, ModelParallelStrategy):  # FSDP2: no reduce-scatter on intermediate passes
            return no_gradient_sync(self.lightning_module.model)
        return self.block_backward_sync()

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


def plan_micro_batches(rows: Tensor, size: int | None, count: int) -> list[MicroBatch]:
    """Chunks of ``rows`` of at most ``size`` (None: one chunk) with weight 1, padded to ``count``
    chunks by chunks that re-run one row with weight 0: every rank must run as many forward and
    backward passes (each is a collective under DDP and FSDP2)."""
    chunks = torch.split(rows, size or max(len(rows), 1))
    plan = [(chunk, 1.0) for chunk in chunks if len(chunk)]
    filler = rows[:1] if len(rows) else torch.zeros(1, dtype=torch.long)
    return plan + [(filler, 0.0)] * (count - len(plan))


def chunk_count(rows: Tensor, size: int | None) -> int:
    """Micro-batches of ``size`` that ``rows`` need."""
    return -(-len(rows) // (size or max(len(rows), 1)))


@contextmanager
def no_gradient_sync(model):
    """FSDP2 gradient synchronisation off for the duration (gradients accumulate locally)."""
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)
