"""`Checkpoints`: Lightning's ModelCheckpoint with atomic writes (files and sharded folders alike)
and the final weights always saved at the end of fit."""

from __future__ import annotations

from pathlib import Path
from weakref import proxy

from lightning.pytorch.callbacks import ModelCheckpoint

from zoo.checkpoints import publish, remove_stale, temporary_path


class Checkpoints(ModelCheckpoint):
    """`lightning.pytorch.callbacks.ModelCheckpoint` (same arguments; the default checkpointing of
    ``zoo fit``) that never leaves a half-written checkpoint under a checkpoint's name and never
    ends fit unsaved:

    - every checkpoint, a ``.ckpt`` file or the folder of shards `zoo.grpo.GRPOFSDPStrategy` writes,
      is written under a temporary name beside its target, flushed to disk and renamed into place,
      so a kill mid-save leaves the previous checkpoint whole; temporary files of killed runs are
      removed when a run starts;
    - the weights at the end of fit are saved when the last step saved nothing (``max_steps`` not a
      multiple of ``val_check_interval``, or a run shorter than it): as the step's checkpoint
      without ``monitor``, else as ``last.ckpt``; ``--ckpt_path last`` finds them.
    """

    def setup(self, trainer, pl_module, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if trainer.is_global_zero and self.dirpath:
            remove_stale(self.dirpath)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        # Lightning ends an epoch when max_steps is reached mid-epoch too; saving here, before the
        # epoch counts as completed, lets a resumed run continue the epoch where it stopped
        # (on_train_end would be too late)
        if _fit_ends(trainer) and not self._should_skip_saving_checkpoint(trainer):
            candidates = self._monitor_candidates(trainer)
            if self.monitor is None and self.save_top_k != 0:
                self._save_topk_checkpoint(trainer, candidates)
                self._save_last_checkpoint(trainer, candidates)
            else:  # a monitored top-k would keep the final weights only if they scored best
                self.last_model_path = self.format_checkpoint_name(candidates, self.CHECKPOINT_NAME_LAST)
                self._save_checkpoint(trainer, self.last_model_path)

    def _save_checkpoint(self, trainer, filepath: str) -> None:
        """What ModelCheckpoint does, writing to a temporary name that rank 0 renames once every
        rank is done."""
        partial = trainer.strategy.broadcast(str(temporary_path(filepath)))
        trainer.save_checkpoint(partial, self.save_weights_only)
        if trainer.is_global_zero:
            publish(Path(partial), Path(filepath))
        trainer.strategy.barrier("Checkpoints.publish")
        self._last_global_step_saved = trainer.global_step
        self._last_checkpoint_saved = filepath
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.after_save_checkpoint(proxy(self))


def _fit_ends(trainer) -> bool:
    """Whether the epoch ending now is the last of fit: ``max_steps`` reached, a stop requested, or
    the last of ``max_epochs``."""
    last_epoch = trainer.max_epochs not in (None, -1) and trainer.current_epoch + 1 >= trainer.max_epochs
    return trainer.fit_loop.epoch_loop.done or trainer.should_stop or last_epoch
