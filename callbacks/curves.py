"""At the end of ``fit``, a PNG of the reward, accuracy and KL curves in the run directory."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import Callback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from callbacks.metrics import run_path

PANELS = (("reward", "reward"), ("accuracy", "accuracy"), ("KL to reference", "kl"))


class TrainingCurves(Callback):
    """Records the metrics `callbacks.GRPOMetrics` logs (``train/reward``,
    ``train/reward/<task>/accuracy``, ``train/grpo/kl``, ``val/reward``, ``val/accuracy``) and at
    the end of ``fit`` plots them into ``<log_dir>/<filename>``, one panel each for reward, accuracy
    and KL. Needs matplotlib (``zoo[dev]``); without it the plot is skipped with a warning. The
    history is saved in checkpoints, so a resumed run plots the whole run.

    Args:
        filename: PNG file name inside the logger's directory (the trainer's root dir without a
            logger).
    """

    def __init__(self, filename: str = "curves.png"):
        self.filename = filename
        self.series: dict[str, list[tuple[int, float]]] = {}
        self.path: Path | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.path = run_path(trainer, self.filename)

    def _add(self, name: str, step: int, value) -> None:
        self.series.setdefault(name, []).append((step, float(value)))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        for name, value in (outputs or {}).get("metrics", {}).items():
            if name in ("train/reward", "train/grpo/kl") or name.endswith("/accuracy"):
                self._add(name, trainer.global_step, value)

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        for name in ("val/reward", "val/accuracy"):
            if name in trainer.callback_metrics:
                self._add(name, trainer.global_step, trainer.callback_metrics[name])

    def on_fit_end(self, trainer, pl_module):
        if trainer.is_global_zero and self.series:
            self.plot(self.path)

    def plot(self, path: Path) -> list[str]:
        """Write the PNG; returns the names of the curves drawn (also stored in the PNG's ``Curves``
        text)."""
        try:
            import matplotlib
        except ImportError:
            rank_zero_warn("TrainingCurves needs matplotlib (pip install 'zoo[dev]'): no curves.png written")
            return []
        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

        fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 3.6), squeeze=False)
        drawn = []
        for ax, (title, key) in zip(axes[0], PANELS, strict=True):
            names = [n for n in sorted(self.series) if n.rsplit("/", 1)[-1] == key]
            for name in names:
                steps, values = zip(*self.series[name], strict=True)
                ax.plot(steps, values, marker="o" if len(steps) < 20 else None, markersize=3, label=name)
            drawn += names
            ax.set_title(title)
            ax.set_xlabel("step")
            if names:
                ax.legend(fontsize=7)
            else:
                ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100, metadata={"Curves": ", ".join(drawn)})
        plt.close(fig)
        rank_zero_info(f"[zoo] training curves written to {path}")
        return drawn

    def state_dict(self) -> dict:
        return {"series": {name: [list(point) for point in points] for name, points in self.series.items()}}

    def load_state_dict(self, state_dict: dict) -> None:
        self.series = {name: [tuple(point) for point in points] for name, points in state_dict["series"].items()}
