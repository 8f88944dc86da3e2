"""Logs what the GRPO strategy measured: rewards per task and part, GRPO statistics, timings,
accuracy."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from lightning.pytorch import Callback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from zoo.errors import writing
from zoo.evaluation import TaskMeans
from zoo.metrics import gather_objects

PROGRESS_BAR = ("train/reward", "train/grpo/kl")


class GRPOMetrics(Callback):
    """Logs per-step training metrics (``train/reward`` and ``train/grpo/kl`` on the progress bar)
    and, after each evaluation, the means over every rank (torchmetrics) of the strategy's
    per-example scores, overall and per task: ``<split>/accuracy`` (mean ``accuracy`` reward part),
    ``<split>/reward`` (mean total), ``<split>/pass@<k>`` and
    ``<split>/<task>/{accuracy,reward,pass@<k>}``, ``<split>`` being ``val`` or ``test``. Prints the
    accuracy history and, outside ``fit`` (``zoo validate``, ``zoo test``), a per-task table; writes
    the latest evaluation's metrics to ``<log_dir>/<results>``.

    Args:
        summary: Print each evaluation's accuracy and, at the end of fit, the first and last ones.
        results: File name (in the logger's directory) of a JSON object rewritten after each
            evaluation (during ``fit`` only when a logger gives the run a directory): ``split``,
            ``at``, ``settings`` (the strategy's evaluation settings) and ``metrics``; empty
            disables it.
    """

    def __init__(self, summary: bool = True, results: str = "metrics.json"):
        self.summary = summary
        self.results = results
        self.history: list[tuple[str, dict[str, float]]] = []
        self.path: Path | None = None
        self._eval: TaskMeans | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.path = run_path(trainer, self.results)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        metrics = dict((outputs or {}).get("metrics", {})) | _skips(trainer.datamodule)
        _forget_step_values(trainer, pl_module, keep=metrics)
        for name, value in metrics.items():
            pl_module.log(
                name, value, prog_bar=name in PROGRESS_BAR, on_step=True, on_epoch=False, batch_size=len(batch)
            )

    def _on_eval_epoch_start(self, trainer, pl_module):
        evaluation = getattr(trainer.strategy, "evaluation", None)  # `zoo.evaluation.Evaluation`
        names = evaluation.score_names if evaluation is not None else ["accuracy", "reward"]
        tasks = sorted(getattr(trainer.datamodule, "tasks", {}))
        self._eval = TaskMeans(tasks, names).to(pl_module.device)

    def _on_eval_batch_end(self, outputs, batch):
        if outputs and "scores" in outputs:
            self._eval.update([example.task for example in batch], outputs["scores"])

    def _on_eval_epoch_end(self, trainer, pl_module, prefix: str):
        if trainer.sanity_checking:
            return
        results, self._eval = self._eval.compute(), None  # a collective under DDP: every rank computes
        if not results:
            return
        for name, value in results.items():
            if not name.endswith("examples"):
                pl_module.log(f"{prefix}/{name}", value, prog_bar=name == "accuracy", sync_dist=False)
        accuracy = {k.removesuffix("/accuracy"): v for k, v in results.items() if k.endswith("accuracy")}
        self.history.append((evaluated_at(trainer), accuracy))
        if self.summary:
            shown = ", ".join(f"{k}={v:.3f}" for k, v in accuracy.items())
            rank_zero_info(f"[zoo] {prefix} accuracy at {evaluated_at(trainer)}: {shown}")
        if trainer.state.fn != "fit":
            rank_zero_info(task_table(results))
        if self.results and trainer.is_global_zero and (trainer.loggers or trainer.state.fn != "fit"):
            self._write(trainer, prefix, results)

    def _write(self, trainer, split: str, results: dict[str, float]) -> None:
        evaluation = getattr(trainer.strategy, "evaluation", None)
        settings = evaluation.settings if evaluation is not None else {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with writing(self.path):
            self.path.write_text(
                json.dumps(
                    {
                        "split": split,
                        "at": evaluated_at(trainer),
                        "settings": settings,
                        "metrics": {f"{split}/{k}": v for k, v in results.items()},
                    },
                    indent=1,
                )
            )

    def on_validation_epoch_start(self, trainer, pl_module):
        self._on_eval_epoch_start(trainer, pl_module)

    def on_test_epoch_start(self, trainer, pl_module):
        self._on_eval_epoch_start(trainer, pl_module)

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
            rank_zero_info(
                f"[zoo] held-out accuracy: {first['accuracy']:.3f} at {first_at} -> {last['accuracy']:.3f} at {last_at}"
            )


def task_table(results: dict[str, float]) -> str:
    """A plain-text table of `TaskMeans` results: one row per task and an ``all`` row, one column
    per score."""
    scores = [k for k in results if "/" not in k and k != "examples"]
    tasks = sorted({k.rsplit("/", 1)[0] for k in results if "/" in k})
    rows = [
        [task, f"{results[f'{task}/examples']:.0f}", *(f"{results[f'{task}/{s}']:.3f}" for s in scores)]
        for task in tasks
    ] + [["all", f"{results['examples']:.0f}", *(f"{results[s]:.3f}" for s in scores)]]
    header = ["task", "examples", *scores]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *rows]
    )


def _skips(datamodule) -> dict[str, float]:
    """``data/skipped`` and ``data/skipped/<source>/<kind>``: items skipped so far, summed over
    ranks (a collective call when distributed: every rank calls it at the same step)."""
    if not hasattr(datamodule, "skip_counts"):
        return {}
    counts = sum((Counter(c) for c in gather_objects(datamodule.skip_counts)), Counter())
    named = {f"data/skipped/{source}/{kind}": float(n) for (source, kind), n in sorted(counts.items())}
    return {"data/skipped": float(sum(counts.values())), **named}


class JsonlFile:
    """A JSON-lines log that stops growing at ``max_bytes`` (None: no limit): rows past it are
    dropped, with one warning the first time.

    Args:
        path: The file; rows are appended.
        max_bytes: Most bytes the file may hold.
    """

    def __init__(self, path: Path, max_bytes: int | None = None):
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1 or None, got {max_bytes}")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.full = False

    def append(self, rows: list[dict]) -> int:
        """Append as many of ``rows`` as fit; returns how many were written."""
        lines = [(json.dumps(row, default=str) + "\n").encode() for row in rows]
        size = self.path.stat().st_size if self.path.exists() else 0
        keep = 0
        while keep < len(lines) and (self.max_bytes is None or size + len(lines[keep]) <= self.max_bytes):
            size, keep = size + len(lines[keep]), keep + 1
        if keep < len(lines) and not self.full:
            self.full = True
            rank_zero_warn(f"{self.path} reached max_bytes={self.max_bytes}: later rows are not written")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with writing(self.path), self.path.open("ab") as f:
            f.writelines(lines[:keep])
        return keep


def run_path(trainer, filename: str) -> Path:
    """``filename`` in the run directory (the logger's, else the trainer's root).
    ``trainer.log_dir`` is a collective under DDP: every rank must call this, e.g. from
    ``setup``."""
    return Path(trainer.log_dir or trainer.default_root_dir) / filename


def evaluated_at(trainer) -> str:
    """Where an evaluation happened: a training step, or the weights evaluated outside fit."""
    if trainer.state.fn == "fit":
        return f"step {trainer.global_step}"
    return f"checkpoint {trainer.ckpt_path}" if trainer.ckpt_path else "start"


def _forget_step_values(trainer, pl_module, keep: dict) -> None:
    """Drop this hook's step metrics that the current step does not measure. Lightning logs a step
    metric's last value again at every later step of the epoch, so a task absent from a batch, or a
    loss measured only at the end of an accumulation window, would show stale numbers as if measured
    now."""
    for result in trainer._results.values():  # Lightning's ResultCollection: there is no public way to forget
        meta = result.meta
        if meta.fx == pl_module._current_fx_name and meta.on_step and not meta.on_epoch and meta.name not in keep:
            result.reset()
