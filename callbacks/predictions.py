"""Writes every evaluation prediction (held-out example, completion, extracted answer, reward) to a
JSONL file."""

from __future__ import annotations

from lightning.pytorch import Callback

from callbacks.metrics import JsonlFile, evaluated_at, run_path
from zoo.metrics import gather_objects


class Predictions(Callback):
    """After each evaluation (``zoo validate``, ``zoo test`` and the validations during ``fit``)
    appends one JSON object per evaluated completion to ``<log_dir>/<filename>``: ``split``, ``at``
    (the step or checkpoint), ``uid``, ``sample`` (0 to n - 1: the strategy's
    ``eval_num_generations`` completions of an example are n rows), ``task``, ``prompt``, ``answer``
    (the truth), ``expected`` (the answer as a perfect policy writes it), ``completion``, ``parsed``
    (the answer extracted from the completion by the task's format, None when malformed), ``reward``
    and ``parts``. Under DDP the rows of every rank are gathered and rank 0 writes them, sorted by
    uid and sample.

    Args:
        filename: File name inside the logger's directory (the trainer's root dir without a logger);
            empty disables the file.
        max_rows: Rows written per evaluation (the first by uid and sample); None: every one.
        max_bytes: Most bytes the file may grow to over the run; None: no limit. Rows past it are
            dropped, with one warning.
    """

    def __init__(self, filename: str = "predictions.jsonl", max_rows: int | None = None, max_bytes: int | None = None):
        if max_rows is not None and max_rows < 0:
            raise ValueError(f"max_rows must be >= 0 or None, got {max_rows}")
        self.filename = filename
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.file: JsonlFile | None = None
        self._rows: list[dict] = []

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.file = JsonlFile(run_path(trainer, self.filename), self.max_bytes)

    def _collect(self, trainer, split: str, outputs) -> None:
        if not self.filename or not outputs or "rollout" not in outputs or trainer.sanity_checking:
            return
        tasks = getattr(trainer.datamodule, "tasks", {})
        rollout = outputs["rollout"]
        at = evaluated_at(trainer)
        for n, reward in enumerate(outputs["rewards"]):
            example = rollout.example(n)
            completion = rollout.completions[n]
            task = tasks.get(example.task)
            parsed = task.extract_answer(completion) if task else None
            self._rows.append(
                {
                    "split": split,
                    "at": at,
                    "uid": example.uid,
                    "sample": n % rollout.num_generations,
                    "task": example.task,
                    "prompt": example.prompt_text,
                    "answer": example.answer,
                    "expected": task.answer_text(example) if task else None,
                    "completion": completion,
                    "parsed": parsed,
                    "reward": reward.total,
                    "parts": reward.parts,
                }
            )

    def _write(self, trainer) -> None:
        rows, self._rows = self._rows, []
        if not self.filename or trainer.sanity_checking:
            return
        rows = [row for part in gather_objects(rows) for row in part]
        if trainer.is_global_zero and rows:
            self.file.append(sorted(rows, key=_uid_order)[: self.max_rows])

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._collect(trainer, "val", outputs)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._collect(trainer, "test", outputs)

    def on_validation_epoch_end(self, trainer, pl_module):
        self._write(trainer)

    def on_test_epoch_end(self, trainer, pl_module):
        self._write(trainer)


def _uid_order(row: dict) -> tuple:
    """Uids end in the example index (``seed:stream:epoch:i``): sort numerically, whatever the rank
    split, then by sample."""
    uid = str(row["uid"])
    head, _, index = uid.rpartition(":")
    return (head, int(index), row["sample"]) if index.isdigit() else (uid, 0, row["sample"])
