"""`StepProgress`: a progress bar that counts optimizer steps of ``max_steps`` and shows the reward
and the held-out accuracy under short names (no epoch counter, no logger version)."""

from __future__ import annotations

from lightning.pytorch.callbacks import TQDMProgressBar

#: Progress-bar metrics (logged with ``prog_bar=True``) and the names they are shown under.
SHORT_NAMES = {"train/reward": "reward", "train/grpo/kl": "kl", "val/accuracy": "val_accuracy"}


class StepProgress(TQDMProgressBar):
    """Lightning's TQDM progress bar (same arguments; the default of ``zoo fit``) whose training bar
    reads ``step 120/800`` across epochs, with ``reward``, ``kl`` and ``val_accuracy`` beside it.
    Without ``max_steps`` it counts the batches of each epoch, as Lightning's does."""

    def on_train_epoch_start(self, trainer, *_) -> None:
        if trainer.max_steps <= 0:
            super().on_train_epoch_start(trainer)
            return
        if self._leave:
            self.train_progress_bar = self.init_train_tqdm()
        bar = self.train_progress_bar
        bar.set_description("step", refresh=False)
        bar.reset(total=trainer.max_steps)
        self._show(bar, trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.max_steps <= 0:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            return
        bar = self.train_progress_bar
        if bar is not None and self._should_update(trainer.global_step, bar.total):
            bar.set_postfix(self.get_metrics(trainer, pl_module), refresh=False)
            self._show(bar, trainer.global_step)

    def get_metrics(self, trainer, pl_module) -> dict:
        return {SHORT_NAMES.get(name, name): value for name, value in trainer.progress_bar_metrics.items()}

    @staticmethod
    def _show(bar, n: int) -> None:
        if not bar.disable:
            bar.n = n
            bar.refresh()
