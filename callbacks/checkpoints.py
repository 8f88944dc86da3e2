"""`Checkpoints`: Lightning's ModelCheckpoint with atomic writes (files and sharded folders alike)
and the final weights always saved at the end of fit, or when a signal stops it."""

from __future__ import annotations

from pathlib import Path
from weakref import proxy

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException

from zoo.checkpoints import publish, remove_stale, temporary_path
from zoo.errors import raised_in, writing


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
      without ``monitor``, else as ``last.ckpt``; ``--ckpt_path last`` finds them;
    - so are the weights of the step in progress when SIGTERM (or a first Ctrl+C, `zoo.cli.main`)
      stops fit: once the step is done, or when the signal stopped a validation that followed it.
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
            self._save_final(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        # Lightning stops after this hook once SIGTERM arrived (SIGTERMException): save the step
        # first, as a step checkpoint like every_n_train_steps writes, which resumes exactly
        if _signalled(trainer) and not self._should_skip_saving_checkpoint(trainer):
            self._save_stopped(trainer)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        # a signal that arrived after a step was done (during the validation after it, or before
        # the next step began) stops fit before the step was saved; with several processes only
        # when every rank stopped at the same place, so that they can save together
        stopped = isinstance(exception, SIGTERMException) and trainer.state.fn == "fit"
        together = trainer.world_size == 1 or _stopped_together(exception)
        if stopped and together and not self._should_skip_saving_checkpoint(trainer):
            self._save_stopped(trainer)

    def _save_stopped(self, trainer) -> None:
        self._save_final(trainer)
        rank_zero_info(f"[zoo] stopped by a signal: step {trainer.global_step} saved to {self._last_checkpoint_saved}")

    def _save_final(self, trainer) -> None:
        """Save the current weights as the step's checkpoint (without ``monitor``), else as
        ``last.ckpt`` (a monitored top-k would keep them only if they scored best)."""
        candidates = self._monitor_candidates(trainer)
        if self.monitor is None and self.save_top_k != 0:
            self._save_topk_checkpoint(trainer, candidates)
            self._save_last_checkpoint(trainer, candidates)
        else:
            self.last_model_path = self.format_checkpoint_name(candidates, self.CHECKPOINT_NAME_LAST)
            self._save_checkpoint(trainer, self.last_model_path)

    def _save_checkpoint(self, trainer, filepath: str) -> None:
        """What ModelCheckpoint does, writing to a temporary name that rank 0 renames once every
        rank is done."""
        partial = trainer.strategy.broadcast(str(temporary_path(filepath)))
        with writing(filepath):  # a full disk is one line naming the checkpoint
            trainer.save_checkpoint(partial, self.save_weights_only)
        if trainer.is_global_zero:
            publish(Path(partial), Path(filepath))
        trainer.strategy.barrier("Checkpoints.publish")
        self._last_global_step_saved = trainer.global_step
        self._last_checkpoint_saved = filepath
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.after_save_checkpoint(proxy(self))


def _signalled(trainer) -> bool:
    """Whether SIGTERM reached this process, or (with several) any rank: all ranks then save
    together."""
    received = bool(trainer.received_sigterm)
    return trainer.strategy.reduce_boolean_decision(received, all=False) if trainer.world_size > 1 else received


def _stopped_together(exception: BaseException) -> bool:
    """Whether Lightning raised ``exception`` where it broadcasts rank 0's SIGTERM flag at the start
    of a training step: there every rank raises it at once, after a barrier."""
    return raised_in(exception, {"_broadcast_sigterm_tensor"})


def _fit_ends(trainer) -> bool:
    """Whether the epoch ending now is the last of fit: ``max_steps`` reached, a stop requested, or
    the last of ``max_epochs``."""
    last_epoch = trainer.max_epochs not in (None, -1) and trainer.current_epoch + 1 >= trainer.max_epochs
    return trainer.fit_loop.epoch_loop.done or trainer.should_stop or last_epoch
