"""Writes sampled rollouts (prompt, answer, completion, reward) to a JSONL file in the run directory."""

from __future__ import annotations

import json
from pathlib import Path

from lightning.pytorch import Callback


class RolloutSampler(Callback):
    """Every ``every_n_steps`` training batches (and after each validation) appends up to ``max_rows``
    completions to ``<log_dir>/<filename>``, one JSON object per line.

    Args:
        every_n_steps: Training batches between samples; 0 writes none from training.
        max_rows: Completions written per sample.
        filename: File name inside the logger's directory (the trainer's root dir without a logger).
        validation: Also write the first ``max_rows`` validation completions of each validation run.
    """

    def __init__(self, every_n_steps: int = 50, max_rows: int = 8, filename: str = "rollouts.jsonl",
                 validation: bool = True):
        self.every_n_steps, self.max_rows = every_n_steps, max_rows
        self.filename, self.validation = filename, validation
        self._batches = 0
        self._val_written = 0
        self.path: Path | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        # every rank asks: trainer.log_dir is a collective under DDP
        self.path = Path(trainer.log_dir or trainer.default_root_dir) / self.filename

    def _write(self, trainer, split: str, outputs: dict, limit: int) -> int:
        rollout, rewards = outputs["rollout"], outputs["rewards"]
        rows = []
        for n in range(min(limit, rollout.size)):
            example = rollout.example(n)
            rows.append({"split": split, "step": trainer.global_step, "task": example.task,
                         "prompt": example.prompt_text, "answer": example.answer,
                         "completion": rollout.completions[n], "reward": rewards[n].total,
                         "parts": rewards[n].parts})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.writelines(json.dumps(row, default=str) + "\n" for row in rows)
        return len(rows)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._batches += 1
        due = self.every_n_steps and (self._batches - 1) % self.every_n_steps == 0
        if due and trainer.is_global_zero and outputs and "rollout" in outputs:
            self._write(trainer, "train", outputs, self.max_rows)

    def on_validation_epoch_start(self, trainer, pl_module):
        self._val_written = 0

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        left = self.max_rows - self._val_written
        if self.validation and left > 0 and not trainer.sanity_checking and trainer.is_global_zero and outputs:
            self._val_written += self._write(trainer, "val", outputs, left)
