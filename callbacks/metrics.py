"""Logs what the GRPO strategy measured: rewards per task and part, GRPO statistics, timings, accuracy."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from lightning.pytorch import Callback
from lightning.pytorch.utilities import rank_zero_info

from zoo.grpo.metrics import Means, gather_objects

PROGRESS_BAR = ("train/reward", "train/grpo/kl")


class GRPOMetrics(Callback):
    """Logs per-step training metrics (``train/reward`` and ``train/grpo/kl`` on the progress bar) and held-out accuracy
    (``val/<task>/accuracy``, ``val/accuracy``) after each validation, and prints the accuracy history.

    Args:
        summary: Print each validation's accuracy and, at the end of fit, the first and last ones.
    """

    def __init__(self, summary: bool = True):
        self.summary = summary
        self.history: list[tuple[str, dict[str, float]]] = []
        self._eval = Means()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        metrics = dict((outputs or {}).get("metrics", {})) | _skips(trainer.datamodule)
        for name, value in metrics.items():
            pl_module.log(name, value, prog_bar=name in PROGRESS_BAR, on_step=True, on_epoch=False,
                          batch_size=len(batch))

    def _on_eval_batch_end(self, outputs, batch):
        if not outputs or "rewards" not in outputs:
            return
        for example, reward in zip(batch, outputs["rewards"], strict=True):
            self._eval.add("accuracy", reward.parts.get("accuracy", 0.0))
            self._eval.add(f"{example.task}/accuracy", reward.parts.get("accuracy", 0.0))
            self._eval.add("reward", reward.total)

    def _on_eval_epoch_end(self, trainer, pl_module, prefix: str):
        results, self._eval = self._eval.result(), Means()
        if trainer.sanity_checking or not results:
            return
        for name, value in results.items():
            pl_module.log(f"{prefix}/{name}", value, prog_bar=name == "accuracy", sync_dist=False)
        accuracy = {k.removesuffix("/accuracy"): v for k, v in results.items() if k.endswith("accuracy")}
        self.history.append((evaluated_at(trainer), accuracy))
        if self.summary:
            shown = ", ".join(f"{k}={v:.3f}" for k, v in accuracy.items())
            rank_zero_info(f"[zoo] {prefix} accuracy at {evaluated_at(trainer)}: {shown}")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._on_eval_batch_end(outputs, batch)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._on_eval_batch_end(outputs, batch)

    def on_validation_epoch_end(self, trainer, pl_module):
        self._on_eval_epoch_end(trainer, pl_module, "val")

    def on_test_epoch_end(self, trainer, pl_module):
        self._on_eval_epoch_end(trainer, pl_module, "test")

    def on_fit_end(self, trainer, pl_module):
        if self.summary and len(self.history) >= 2:
            (first_at, first), (last_at, last) = self.history[0], self.history[-1]
            rank_zero_info(f"[zoo] held-out accuracy: {first['accuracy']:.3f} at {first_at} -> "
                           f"{last['accuracy']:.3f} at {last_at}")


def _skips(datamodule) -> dict[str, float]:
    """``data/skipped`` and ``data/skipped/<source>/<kind>``: items skipped so far, summed over ranks (a
    collective call when distributed: every rank calls it at the same step)."""
    if not hasattr(datamodule, "skip_counts"):
        return {}
    counts = sum((Counter(c) for c in gather_objects(datamodule.skip_counts)), Counter())
    named = {f"data/skipped/{source}/{kind}": float(n) for (source, kind), n in sorted(counts.items())}
    return {"data/skipped": float(sum(counts.values())), **named}


def run_path(trainer, filename: str) -> Path:
    """``filename`` in the run directory (the logger's, else the trainer's root). ``trainer.log_dir`` is a
    collective under DDP: every rank must call this, e.g. from ``setup``."""
    return Path(trainer.log_dir or trainer.default_root_dir) / filename


def evaluated_at(trainer) -> str:
    """Where an evaluation happened: a training step, or the weights evaluated outside fit."""
    if trainer.state.fn == "fit":
        return f"step {trainer.global_step}"
    return f"checkpoint {trainer.ckpt_path}" if trainer.ckpt_path else "start"
