"""Supervised fine-tuning as a Lightning Strategy: one training step = teacher forcing on the data
module's demonstrations, the loss on the assistant tokens only, then an optimizer step.

`SFTMixin` holds the algorithm; `SFTStrategy` (one device), `SFTDDPStrategy` (DDP) and
`SFTFSDPStrategy` (FSDP2) add it to Lightning's strategies, as `zoo.grpo` does for GRPO, so any
`zoo.PolicyModule`, config, launcher, checkpoint, LoRA / freeze setting and export works for SFT
unchanged. Both stand on `zoo.training.ManualStep`; held-out evaluation is the same
(`zoo.evaluation.Evaluation`: greedy or sampled accuracy, pass@k), so SFT and GRPO runs report the
same metrics.
"""

from __future__ import annotations

import logging
import time

import torch
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy, ParallelStrategy, SingleDeviceStrategy
from torch import Tensor

from zoo import data
from zoo.devices import FSDP2, OneDevice
from zoo.evaluation import Evaluation
from zoo.metrics import MetricMeans
from zoo.rollout.turns import toolboxes
from zoo.sft import functional as F
from zoo.sft.demonstrations import teacher_forced
from zoo.training import ManualStep, check_micro_batching

log = logging.getLogger(__name__)


class SFTMixin(ManualStep):
    """Supervised fine-tuning of a `zoo.PolicyModule` on the demonstrations of a data module with
    ``demonstration(example)`` (`datamodules.PretextDataModule`: each task's perfect answer;
    `datamodules.ConversationDataModule`: the recorded assistant turns).

    The loss is the negative log-likelihood of the demonstration tokens given the prompt, computed
    by the policy's own scoring path (the one GRPO uses), so only the completion (through the
    end-of-turn token) is trained: prompt, media placeholders and padding never are. The normaliser
    is the count over the whole optimizer step (every micro-batch, every accumulated batch, every
    rank), applied to the summed gradients before clipping, so the update does not depend on how the
    step is split.

    Args:
        normaliser: ``token``: mean over every demonstration token of the step (long answers weigh
            more); ``sequence``: mean over demonstrations of each one's token mean.
        micro_batch_size: Demonstrations per forward/backward pass (bounds memory); None does all at
            once.
        max_tokens_per_micro_batch: Token budget of a forward/backward pass: demonstrations packed
            by their real lengths (as `zoo.grpo.GRPOMixin` packs completions); None counts rows
            only.
        max_target_tokens: Longest demonstration trained, in tokens (longer ones are cut and counted
            in ``train/sft/truncated``); None keeps every one whole.
        max_grad_norm: Gradient clipping norm per optimizer step; None disables.
        max_new_tokens: Completion length limit of held-out evaluation.
        eval_num_generations: Completions per held-out example (see `zoo.grpo.GRPOMixin`).
        eval_temperature: 0 decodes greedily; > 0 samples with the fixed ``eval_seed``.
        eval_top_p: Nucleus threshold of sampled evaluation.
        eval_seed: Fixed seed of sampled evaluation.
        eval_pass_k: k values of the pass@k estimate; None reports pass@1 and pass@n.
        eval_maj_k: k values of majority-vote maj@k (see `zoo.grpo.GRPOMixin`); None reports none.
        **kwargs: Arguments of the Lightning strategy.
    """

    def __init__(
        self,
        normaliser: str = "token",
        micro_batch_size: int | None = None,
        max_tokens_per_micro_batch: int | None = None,
        max_target_tokens: int | None = None,
        max_grad_norm: float | None = 1.0,
        max_new_tokens: int = 256,
        eval_num_generations: int = 1,
        eval_temperature: float = 0.0,
        eval_top_p: float = 1.0,
        eval_seed: int = 0,
        eval_pass_k: list[int] | None = None,
        eval_maj_k: list[int] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for ok, message in (
            (normaliser in F.NORMALISERS, f"normaliser must be one of {F.NORMALISERS}"),
            (max_target_tokens is None or max_target_tokens >= 1, "max_target_tokens must be >= 1"),
            (max_new_tokens >= 1, f"max_new_tokens must be >= 1, got {max_new_tokens}"),
        ):
            if not ok:
                raise ValueError(message)
        check_micro_batching(micro_batch_size, max_tokens_per_micro_batch)
        self.normaliser = normaliser
        self.micro_batch_size = micro_batch_size
        self.max_tokens_per_micro_batch = max_tokens_per_micro_batch
        self.max_target_tokens = max_target_tokens
        self.max_grad_norm = max_grad_norm
        self.max_new_tokens = max_new_tokens
        self._window_count = 0.0  # tokens (or demonstrations) in the gradients accumulated so far
        self.evaluation = Evaluation(
            eval_num_generations, eval_temperature, eval_top_p, eval_seed, eval_pass_k, max_new_tokens, eval_maj_k
        )

    def data_needs(self) -> list[data.Need]:
        return [data.REWARDS, data.DEMONSTRATIONS]

    # ---- the step -------------------------------------------------------------------------------
    def training_step(self, batch: list, batch_idx: int) -> dict:
        """One SFT step: teacher-force the batch's demonstrations, backward, and (at a window's last
        batch) step."""
        module = self.lightning_module
        means = MetricMeans()
        start = time.perf_counter()
        replies = [module.trainer.datamodule.demonstration(example) for example in batch]
        boxes = toolboxes(module.trainer.datamodule, batch)
        rollout, dropped = teacher_forced(module, batch, replies, self.max_target_tokens, boxes)
        if dropped.any():
            _log_dropped(batch, dropped)
        loss = self._update(rollout, means, step=self.steps_now(batch_idx))
        tokens = rollout.prompts.tensors["attention_mask"].sum() + rollout.completion_mask.sum()
        means.add("train/sft/dropped", float(dropped.float().mean()))
        means.add("train/sft/truncated", float(rollout.truncated.float().mean()))
        means.add("train/sft/target_len", float(rollout.completion_mask.sum(1).float().mean()))
        means.add("perf/train_s", time.perf_counter() - start)
        means.add("perf/tokens_per_s", float(tokens) / (time.perf_counter() - start))
        return {"loss": loss, "metrics": means.result()}

    def _update(self, rollout, means: MetricMeans, step: bool) -> Tensor:
        """Backward passes of the summed loss over micro-batches, then (when ``step``) the optimizer
        step with the gradients divided by the window's global count. Returns this batch's mean
        loss."""
        mask = rollout.completion_mask  # [B, L]
        (plan,) = self.plan([torch.arange(rollout.size)], [rollout])
        total = torch.zeros((), device=self.root_device)
        correct = 0.0
        for i, (chunk, live) in enumerate(plan):
            out = self.forward(rollout, chunk, greedy=True)
            summed = F.sft_loss(out["logps"], mask[chunk], self.normaliser, divisor=1.0)
            self.backward_pass(summed * live, last=step and i == len(plan) - 1)
            total += summed.detach() * live
            correct += F.token_accuracy(out["greedy"], mask[chunk])[0] * live
        tokens = float(mask.sum())
        count = tokens if self.normaliser == "token" else float(mask.any(1).sum())
        self._window_count += count
        means.add("train/sft/loss", float(total) / max(count, 1.0), count)
        means.add("train/sft/token_accuracy", correct / max(tokens, 1.0), tokens)
        if step:
            self._step(means)
        return total / max(count, 1.0)

    def _step(self, means: MetricMeans) -> None:
        """The optimizer step, with the summed gradients divided by the window's count over every
        rank."""
        world = self.world_size if isinstance(self, ParallelStrategy) else 1
        window = torch.tensor(self._window_count, device=self.root_device)
        count = float(self.reduce(window, reduce_op="sum"))
        self._window_count = 0.0
        # gradients are averaged over ranks, so world / global count gives the global mean
        skipped = self.step_optimizer(means, "train/sft", scale=world / max(count, 1.0))
        means.add("train/sft/skipped_steps", float(skipped))


_warned_dropped: set[str] = set()


def _log_dropped(batch: list, dropped: Tensor) -> None:
    """Log once per task that demonstrations holding a token the policy never emits are left out."""
    for example, bad in zip(batch, dropped.tolist(), strict=True):
        if bad and example.task not in _warned_dropped:
            _warned_dropped.add(example.task)
            log.warning(
                "a %s demonstration holds a media placeholder or other banned token and is left out of "
                "the loss (counted in train/sft/dropped); example %s",
                example.task,
                example.uid or "?",
            )


class SFTStrategy(OneDevice, SFTMixin, SingleDeviceStrategy):
    """SFT on one device (CPU or one GPU).

    Args:
        device: Device to train on; None takes the trainer's accelerator's first device.
        **kwargs: SFT settings (see `SFTMixin`) and `SingleDeviceStrategy` arguments.
    """

    parallel = "zoo.sft.SFTDDPStrategy"


class SFTDDPStrategy(SFTMixin, DDPStrategy):
    """SFT over DistributedDataParallel: each rank trains on its own demonstrations, gradients are
    all-reduced.

    Args:
        **kwargs: SFT settings (see `SFTMixin`) and `DDPStrategy` arguments
            (``process_group_backend``, ``find_unused_parameters``, ``start_method``, ...).
    """


class SFTFSDPStrategy(FSDP2, SFTMixin, ModelParallelStrategy):
    """SFT over FSDP2, sharded exactly as `zoo.grpo.GRPOFSDPStrategy` shards GRPO (data-parallel
    mesh over every process, the policy's blocks sharded in ``configure_model``); checkpoints are
    distributed folders.

    Args:
        param_dtype: Dtype the parameters are gathered in for compute; None keeps the parameters'
            own.
        reduce_dtype: Dtype gradients are reduced in (with ``param_dtype`` set); None uses
            ``param_dtype``.
        **kwargs: SFT settings (see `SFTMixin`) and `ModelParallelStrategy` arguments.
    """
