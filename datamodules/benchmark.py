"""`BenchmarkDataModule`: every item of a labelled benchmark, once, for ``zoo validate`` and ``zoo
test``."""

from __future__ import annotations

from datamodules.base import PretextDataModule
from datamodules.sources.base import Source
from tasks import Task


class BenchmarkDataModule(PretextDataModule):
    """Evaluates a policy on a whole benchmark: held-out example ``i`` is item ``i`` of ``source``
    made into a prompt by ``task``, for every item in order (``zoo validate`` and ``zoo test`` give
    the same set), so the logged ``test/accuracy`` and ``predictions.jsonl`` cover the benchmark
    exactly once.

    Rows a benchmark source cannot use are dropped when it reads its file (counted and logged
    there). An item that still fails when used (a video that does not decode) is skipped, counted
    and replaced by the next item as in `PretextDataModule`, so that next item is then scored twice:
    check the ``data/skipped`` count. Training is refused: train with `PretextDataModule` on a
    training split and pass a benchmark as its ``val_source``.

    Args:
        source: The benchmark items (e.g. `datamodules.MCQBenchmark`).
        task: Turns each item into a prompt and scores completions (e.g. `tasks.MultipleChoice` with
            ``shuffle_choices: false``).
        batch_size: Prompts per evaluation batch on each rank.
        num_workers: DataLoader worker processes.
        seed: Seeds the task's randomness (only shuffled options use it).
    """

    def __init__(self, source: Source, task: Task, batch_size: int = 8, num_workers: int = 0, seed: int = 0):
        super().__init__(
            source,
            task,
            batch_size=batch_size,
            val_source=source,
            val_size=len(source),
            num_workers=num_workers,
            seed=seed,
        )

    def test_dataloader(self):
        return self.val_dataloader()

    def train_dataloader(self):
        raise RuntimeError(
            "BenchmarkDataModule only evaluates (zoo validate / zoo test); to train, use "
            "datamodules.PretextDataModule with a training split as source and the benchmark as "
            "val_source"
        )
