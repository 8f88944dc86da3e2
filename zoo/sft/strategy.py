"""Supervised fine-tuning as a Lightning Strategy: one training step = teacher forcing on the data module's
demonstrations, the loss on the assistant tokens only, then an optimizer step.

`SFTMixin` holds the algorithm; `SFTStrategy` (one device), `SFTDDPStrategy` (DDP) and `SFTFSDPStrategy` (FSDP2)
add it to Lightning's strategies, as `zoo.grpo` does for GRPO, so any `zoo.PolicyModule`, config, launcher,
checkpoint, LoRA / freeze setting and export works for SFT unchanged. Held-out evaluation is GRPO's own
(`zoo.grpo.evaluation.EvaluationMixin`: greedy or sampled accuracy, pass@k), so SFT and GRPO runs report the same
metrics.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import nullcontext

import torch
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy, ParallelStrategy, SingleDeviceStrategy
from torch import Tensor

from zoo.devices import FSDP2, OneDevice
from zoo.grpo.evaluation import EvaluationMixin
from zoo.grpo.metrics import Means
from zoo.grpo.window import chunk_count, plan_micro_batches
from zoo.sft import functional as F
from zoo.sft.demonstrations import teacher_forced

log = logging.getLogger(__name__)


class SFTMixin(EvaluationMixin):
    """Supervised fine-tuning of a `zoo.PolicyModule` on the demonstrations of a data module with
    ``demonstration(example)`` (`datamodules.PretextDataModule`: each task's perfect answer;
    `datamodules.ConversationDataModule`: the recorded assistant turns).

    The loss is the negative log-likelihood of the demonstration tokens given the prompt, computed by the
    policy's own scoring path (the one GRPO uses), so only the completion (through the end-of-turn token) is
    trained: prompt, media placeholders and padding never are. The normaliser is the count over the whole
    optimizer step (every micro-batch, every accumulated batch, every rank), applied to the summed gradients
    before clipping, so the update does not depend on how the step is split.

    Args:
        normaliser: ``token``: mean over every demonstration token of the step (long answers weigh more);
            ``sequence``: mean over demonstrations of each one's token mean.
        micro_batch_size: Demonstrations per forward/backward pass (bounds memory); None does all at once.
        max_target_tokens: Longest demonstration trained, in tokens (longer ones are cut and counted in
            ``train/sft/truncated``); None keeps every one whole.
        max_grad_norm: Gradient clipping norm per optimizer step; None disables.
        max_new_tokens: Completion length limit of held-out evaluation.
        eval_num_generations: Completions per held-out example (see `zoo.grpo.GRPOMixin`).
        eval_temperature: 0 decodes greedily; > 0 samples with the fixed ``eval_seed``.
        eval_top_p: Nucleus threshold of sampled evaluation.
        eval_seed: Fixed seed of sampled evaluation.
        eval_pass_k: k values of the pass@k estimate; None reports pass@1 and pass@n.
        **kwargs: Arguments of the Lightning strategy.
    """

    def __init__(
        self,
        normaliser: str = "token",
        micro_batch_size: int | None = None,
        max_target_tokens: int | None = None,
        max_grad_norm: float | None = 1.0,
        max_new_tokens: int = 256,
        eval_num_generations: int = 1,
        eval_temperature: float = 0.0,
        eval_top_p: float = 1.0,
        eval_seed: int = 0,
        eval_pass_k: list[int] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for ok, message in ((normaliser in F.NORMALISERS, f"normaliser must be one of {F.NORMALISERS}"),
                            (micro_batch_size is None or micro_batch_size >= 1, "micro_batch_size must be >= 1"),
                            (max_target_tokens is None or max_target_tokens >= 1, "max_target_tokens must be >= 1"),
                            (max_new_tokens >= 1, f"max_new_tokens must be >= 1, got {max_new_tokens}")):
            if not ok:
                raise ValueError(message)
        self.normaliser, self.micro_batch_size = normaliser, micro_batch_size
        self.max_target_tokens, self.max_grad_norm = max_target_tokens, max_grad_norm
        self.max_new_tokens = max_new_tokens
        self.accumulate_grad_batches = 1
        self._window_count = 0.0  # tokens (or demonstrations) in the gradients accumulated so far
        self._set_evaluation(eval_num_generations, eval_temperature, eval_top_p, eval_seed, eval_pass_k)

    def connect(self, model) -> None:
        """Takes over ``trainer.accumulate_grad_batches`` (Lightning refuses it under manual optimization):
        the optimizer steps once per that many batches, normalised by all of their tokens."""
        super().connect(model)
        trainer = model._trainer
        if trainer is not None and trainer.accumulate_grad_batches > 1:
            self.accumulate_grad_batches, trainer.accumulate_grad_batches = trainer.accumulate_grad_batches, 1

    def load_checkpoint(self, checkpoint_path, weights_only: bool | None = None) -> dict:
        """Checkpoints are always read with ``weights_only=True``: loading a file never runs its code."""
        return super().load_checkpoint(checkpoint_path, weights_only=True)

    # ---- the step -------------------------------------------------------------------------------
    def training_step(self, batch: list, batch_idx: int) -> dict:
        module, means = self.lightning_module, Means()
        start = time.perf_counter()
        rollout, dropped = teacher_forced(module, batch, self._demonstrations(batch), self.max_target_tokens)
        if dropped.any():
            _log_dropped(batch, dropped)
        step = self._steps_now(batch_idx)
        loss = self._update(rollout, means, step)
        tokens = rollout.prompts.tensors["attention_mask"].sum() + rollout.completion_mask.sum()
        means.add("train/sft/dropped", float(dropped.float().mean()))
        means.add("train/sft/truncated", float(rollout.truncated.float().mean()))
        means.add("train/sft/target_len", float(rollout.completion_mask.sum(1).float().mean()))
        means.add("perf/train_s", time.perf_counter() - start)
        means.add("perf/tokens_per_s", float(tokens) / (time.perf_counter() - start))
        return {"loss": loss, "metrics": means.result()}

    def _demonstrations(self, batch: list) -> list[str]:
        datamodule = self.lightning_module.trainer.datamodule
        if not hasattr(datamodule, "demonstration"):
            raise RuntimeError("SFT needs a data module with demonstration(example), e.g. "
                               "datamodules.PretextDataModule or datamodules.ConversationDataModule")
        return [datamodule.demonstration(example) for example in batch]

    def _steps_now(self, batch_idx: int) -> bool:
        """Whether this batch ends a gradient accumulation window (always, without accumulation)."""
        last_of_epoch = batch_idx + 1 == self.lightning_module.trainer.num_training_batches
        return (batch_idx + 1) % self.accumulate_grad_batches == 0 or last_of_epoch

    def _update(self, rollout, means: Means, step: bool) -> Tensor:
        """Backward passes of the summed loss over micro-batches, then (when ``step``) the optimizer step with
        the gradients divided by the window's global count. Returns this batch's mean loss."""
        mask = rollout.completion_mask  # [B, L]
        plan = self._micro_batches(torch.arange(rollout.size))
        total, correct = torch.zeros((), device=self.root_device), 0.0
        for i, (chunk, live) in enumerate(plan):
            with self._sync_context(last=step and i == len(plan) - 1):
                out = super().training_step(rollout, chunk)
                summed = F.sft_loss(out["logps"], mask[chunk], self.normaliser, divisor=1.0)
                self.lightning_module.manual_backward(summed * live)
            total += summed.detach() * live
            correct += F.token_accuracy(out["greedy"], mask[chunk])[0] * live
        tokens = float(mask.sum())
        count = tokens if self.normaliser == "token" else float(mask.any(1).sum())
        self._window_count += count
        means.add("train/sft/loss", float(total) / max(count, 1.0), count)
        means.add("train/sft/token_accuracy", correct / max(tokens, 1.0), tokens)
        if step:
            self._optimizer_step(means)
        return total / max(count, 1.0)

    def _micro_batches(self, rows: Tensor) -> list[tuple[Tensor, float]]:
        """Chunks of ``rows`` with weight 1; every rank gets the same number of chunks (padding chunks re-run
        one row with weight 0) because each backward pass is a collective under DDP."""
        count = torch.tensor(chunk_count(rows, self.micro_batch_size), device=self.root_device)
        return plan_micro_batches(rows, self.micro_batch_size, int(self.reduce(count, reduce_op="max")))

    def _sync_context(self, last: bool):
        """Skip the gradient all-reduce on every micro-batch but the last."""
        if last or not isinstance(self, ParallelStrategy):
            return nullcontext()
        return self.block_backward_sync()

    def _optimizer_step(self, means: Means) -> None:
        """Divide the summed gradients by the window's global count, clip and step; a non-finite gradient
        skips the update (weights and optimizer moments stay as they were) but still counts as a step."""
        module = self.lightning_module
        optimizer = module.optimizers()
        world = self.world_size if isinstance(self, ParallelStrategy) else 1
        count = float(self.reduce(torch.tensor(self._window_count, device=self.root_device), reduce_op="sum"))
        self._window_count = 0.0
        params = [p for p in module.parameters() if p.requires_grad]
        for p in params:  # gradients are averaged over ranks, so world / global count gives the global mean
            if p.grad is not None:
                p.grad.mul_(world / max(count, 1.0))
        clip = self.max_grad_norm if self.max_grad_norm is not None else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # a DTensor under FSDP2
        means.add("train/sft/skipped_steps", float(not math.isfinite(norm)))
        if math.isfinite(norm):
            means.add("train/sft/grad_norm", norm)
        else:
            log.warning("step %d: non-finite gradient norm (%s); the update is skipped",
                        module.trainer.global_step, norm)
            optimizer.zero_grad(set_to_none=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler = module.lr_schedulers()
        if scheduler is not None:
            scheduler.step()


_warned_dropped: set[str] = set()


def _log_dropped(batch: list, dropped: Tensor) -> None:
    """Log once per task that demonstrations holding a token the policy never emits are left out."""
    for example, bad in zip(batch, dropped.tolist(), strict=True):
        if bad and example.task not in _warned_dropped:
            _warned_dropped.add(example.task)
            log.warning("a %s demonstration holds a media placeholder or other banned token and is left out of "
                        "the loss (counted in train/sft/dropped); example %s", example.task, example.uid or "?")


class SFTStrategy(OneDevice, SFTMixin, SingleDeviceStrategy):
    """SFT on one device (CPU or one GPU).

    Args:
        device: Device to train on; None takes the trainer's accelerator's first device.
        **kwargs: SFT settings (see `SFTMixin`) and `SingleDeviceStrategy` arguments.
    """

    parallel = "zoo.sft.SFTDDPStrategy"


class SFTDDPStrategy(SFTMixin, DDPStrategy):
    """SFT over DistributedDataParallel: each rank trains on its own demonstrations, gradients are all-reduced.

    Args:
        **kwargs: SFT settings (see `SFTMixin`) and `DDPStrategy` arguments (``process_group_backend``,
            ``find_unused_parameters``, ``start_method``, ...).
    """


class SFTFSDPStrategy(FSDP2, SFTMixin, ModelParallelStrategy):
    """SFT over FSDP2, sharded exactly as `zoo.grpo.GRPOFSDPStrategy` shards GRPO (data-parallel mesh over every
    process, the policy's blocks sharded in ``configure_model``); checkpoints are distributed folders.

    Args:
        param_dtype: Dtype the parameters are gathered in for compute; None keeps the parameters' own.
        reduce_dtype: Dtype gradients are reduced in (with ``param_dtype`` set); None uses ``param_dtype``.
        **kwargs: SFT settings (see `SFTMixin`) and `ModelParallelStrategy` arguments.
    """
