"""Curriculum: change the task mix or task options (e.g. a jigsaw grid 2x2 -> 3x3) at a training
step or once a training metric reaches a threshold, reproducibly and identically on every rank.

Unlike the other callbacks this one changes what is learned: it drives
`datamodules.PretextDataModule`'s curriculum stages. Its decisions are saved in checkpoints, so a
resumed run makes the same examples.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from lightning.pytorch import Callback
from lightning.pytorch.utilities import rank_zero_info

from zoo.data import STAGES, check_data


@dataclass
class Stage:
    """One stage of a curriculum, after the data module's configured tasks and weights.

    Attributes:
        weights: Task weights from this stage on, one per task of the data module (None: unchanged).
        tasks: Task options changed from this stage on, by task name (``{"jigsaw": {"rows": 3,
            "cols": 3}}``), on top of the changes of earlier stages.
        step: Begin at this training batch (counted from 0 over all epochs; the optimizer step
            unless ``num_iterations``, ``mini_batches`` or ``accumulate_grad_batches`` differ from
            1). Exactly one of
            ``step`` and ``metrics`` is given.
        metrics: Begin at the next epoch once, for each named training metric
            (``train/reward/jigsaw/accuracy``), its mean over the last ``window`` batches of the
            previous stage reaches the threshold.
    """

    weights: list[float] | None = None
    tasks: dict[str, dict] = field(default_factory=dict)
    step: int | None = None
    metrics: dict[str, float] | None = None


class Curriculum(Callback):
    """Moves a `datamodules.PretextDataModule` through ``stages``, each beginning at a fixed step or
    when training metrics reach thresholds.

    A step stage begins exactly at its batch. A metric stage begins at the start of the epoch after
    the one in which its thresholds were met (data loader workers build an epoch's examples ahead,
    so that is the first point every example can follow the decision); set ``data.epoch_size`` to
    bound the delay. The metrics are the all-rank means the GRPO strategy reports, so every rank
    decides alike, and the decisions and the metric window are saved in checkpoints: resuming
    replays the same examples.

    Args:
        stages: The stages, in order.
        window: Batches averaged before a metric threshold is compared.
    """

    def __init__(self, stages: list[Stage], window: int = 20):
        for k, stage in enumerate(stages):
            if (stage.step is None) == (stage.metrics is None):
                raise ValueError(f"stage {k + 1}: give exactly one of step and metrics")
            if stage.step is not None and stage.step < 0:
                raise ValueError(f"stage {k + 1}: step must be >= 0, got {stage.step}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.stages = list(stages)
        self.window = window
        self.starts: list[int] = []  # training position (PretextDataModule.position) where each stage began
        self.history: dict[str, deque] = {}

    @property
    def state_key(self) -> str:
        return f"Curriculum{[(s.step, s.metrics) for s in self.stages]}"

    def setup(self, trainer, pl_module, stage: str) -> None:
        datamodule = trainer.datamodule
        check_data(datamodule, [STAGES])
        datamodule.set_curriculum([(s.weights, s.tasks) for s in self.stages])

    def on_train_start(self, trainer, pl_module) -> None:
        self._schedule(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        k = len(self.starts)
        datamodule = trainer.datamodule
        if k == len(self.stages) or (k and datamodule.position(trainer.current_epoch, batch_idx) < self.starts[-1]):
            return  # nothing left to decide, or the newest stage has not begun yet
        metrics = (outputs or {}).get("metrics", {})
        for name in self.stages[k].metrics:
            if name in metrics:  # a task may be absent from a batch
                self.history.setdefault(name, deque(maxlen=self.window)).append(float(metrics[name]))
        if all(
            len(self.history.get(name, ())) == self.window and sum(self.history[name]) / self.window >= bar
            for name, bar in self.stages[k].metrics.items()
        ):
            self._begin(trainer, datamodule.position(trainer.current_epoch + 1, 0))
            self._schedule(trainer)

    def _schedule(self, trainer) -> None:
        """Fix the starts of the step stages that follow the decided ones, and hand all starts to
        the data."""
        while len(self.starts) < len(self.stages) and self.stages[len(self.starts)].step is not None:
            epoch, batch = divmod(self.stages[len(self.starts)].step, trainer.num_training_batches)
            self._begin(trainer, trainer.datamodule.position(epoch, batch))
        trainer.datamodule.set_stage_starts(self.starts)

    def _begin(self, trainer, position: int) -> None:
        self.starts.append(max([position, *self.starts[-1:]]))
        self.history = {}
        rank_zero_info(
            f"[zoo] curriculum stage {len(self.starts)} begins at training example {self.starts[-1]} "
            f"(decided at step {trainer.global_step})"
        )

    def state_dict(self) -> dict:
        return {"starts": list(self.starts), "history": {name: list(v) for name, v in self.history.items()}}

    def load_state_dict(self, state_dict: dict) -> None:
        self.starts = list(state_dict["starts"])
        self.history = {name: deque(values, maxlen=self.window) for name, values in state_dict["history"].items()}
