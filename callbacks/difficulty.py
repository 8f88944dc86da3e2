"""DifficultySampler: draw training items by their recent pass rates (DGRPO-, variance- or
SARI-style), the same on every rank and after a resume.

Like `callbacks.Curriculum` this callback changes what is learned: it sets the item weights of
`datamodules.PretextDataModule` for each epoch.
"""

from __future__ import annotations

import math
import numbers

from lightning.pytorch import Callback
from lightning.pytorch.utilities import rank_zero_info

from datamodules.difficulty import MODES, PassRates, weights
from datamodules.streams import ITEM_KEY
from zoo.metrics import gather_objects


class DifficultySampler(Callback):
    """Tracks each training item's recent pass rate (`datamodules.difficulty.PassRates`) from the
    rewards of its examples' completions, and draws each epoch's items with probability proportional
    to ``max(weight(p), min_weight)`` (`datamodules.difficulty.weights`: ``dgrpo`` ``1 - p/2``,
    ``variance`` ``4p(1-p)``, ``easy_to_hard`` ``p^(1-t) (1-p)^t``; ``p`` is ``prior`` for an item
    not seen yet).

    Every rank folds in the observations of all ranks in rank order, so all hold the same rates; the
    weights of an epoch are fixed when the epoch before it ends (data loader workers build an epoch
    ahead), so set ``data.epoch_size`` to how often they should follow the rates; the first epoch
    draws uniformly. The rates and the current epoch's weights are saved in checkpoints: a resumed
    run draws the same items.

    Args:
        mode: The weight of an item by its pass rate: ``dgrpo``, ``variance`` or ``easy_to_hard``.
        part: The reward part whose mean over an example's completions is its pass rate.
        smoothing: Weight of a new observation in an item's moving average (1: only the latest).
        prior: Pass rate assumed for an item not seen yet.
        min_weight: Floor of every weight, so no item is never drawn again.
    """

    def __init__(
        self,
        mode: str = "variance",
        part: str = "accuracy",
        smoothing: float = 0.5,
        prior: float = 0.5,
        min_weight: float = 0.05,
    ):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not 0 <= prior <= 1 or not 0 < min_weight <= 1:
            raise ValueError(f"need prior in [0, 1] and min_weight in (0, 1], got {prior}, {min_weight}")
        self.mode = mode
        self.part = part
        self.prior = prior
        self.min_weight = min_weight
        self.rates = PassRates(smoothing)
        self.current: tuple[int, dict[str, list[float]]] | None = None  # the weights of the epoch under way

    @property
    def state_key(self) -> str:
        return f"DifficultySampler[{self.mode},{self.part}]"

    def setup(self, trainer, pl_module, stage: str) -> None:
        if not hasattr(trainer.datamodule, "set_item_weights"):
            raise RuntimeError("DifficultySampler needs a data module with item weights: datamodules.PretextDataModule")

    def on_train_start(self, trainer, pl_module) -> None:
        if self.current is None:
            return
        if self.current[0] == trainer.current_epoch:  # resumed mid-epoch: it draws as it did
            trainer.datamodule.set_item_weights(*self.current)
        else:  # resumed from the end of an epoch whose weights for the next were not decided yet
            self._decide(trainer, trainer.current_epoch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        mine = self.observations(trainer.datamodule, outputs)
        self.rates.update(o for rank in gather_objects(mine) for o in rank)  # a collective: every rank calls it

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self._decide(trainer, trainer.current_epoch + 1)

    def _decide(self, trainer, epoch: int) -> None:
        """Fix the weights ``epoch`` draws its items by, from the rates now."""
        items = trainer.datamodule.training_items
        progress = trainer.global_step / trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else 0.0
        drawn = {m: self.epoch_weights(m, n, progress).tolist() for m, n in items.items()}
        self.current = (epoch, drawn)
        trainer.datamodule.set_item_weights(epoch, drawn)
        seen = sum(len(t) for t in self.rates.rates.values())
        rank_zero_info(f"[zoo] difficulty: epoch {epoch} draws by {self.mode} weights ({seen} items seen)")

    def epoch_weights(self, modality: str, n: int, progress: float):
        """The floored weights of the ``n`` training items of ``modality`` at training
        ``progress``."""
        rates = self.rates.array(modality, n, self.prior)
        return weights(rates, self.mode, progress).clip(min=self.min_weight)

    def observations(self, datamodule, outputs) -> list[tuple[str, int, float]]:
        """``(modality, item, pass rate)`` of each training example of this rank's batch: the mean
        of the ``part`` reward over its completions (examples without the part are left out)."""
        rollout = (outputs or {}).get("rollout")
        rewards = (outputs or {}).get("rewards")
        if rollout is None or rewards is None:
            return []
        g = rollout.num_generations
        found = []
        for b, example in enumerate(rollout.examples):
            values = [r.parts[self.part] for r in rewards[b * g : (b + 1) * g] if self.part in r.parts]
            if values and ITEM_KEY in example.meta:
                modality = datamodule.tasks[example.task].modality
                found.append((modality, int(example.meta[ITEM_KEY]), sum(values) / len(values)))
        return found

    def state_dict(self) -> dict:
        return {**self.rates.state_dict(), "current": self.current}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the rates and the current epoch's weights, checked first: a ValueError in one
        line when the checkpoint holds anything `state_dict` could not have written (a NaN or
        infinite rate, a negative item, weights that are negative or all 0), rather than a failure
        at the end of an epoch."""
        rates = PassRates(self.rates.smoothing)
        try:
            rates.load_state_dict(state_dict)
            current = _current(state_dict.get("current") if isinstance(state_dict, dict) else None)
        except ValueError as err:
            raise ValueError(f"{self.state_key} state in the checkpoint: {err}") from None
        self.rates = rates
        self.current = current


def _current(value) -> tuple[int, dict[str, list[float]]] | None:
    """Saved ``(epoch, {modality: item weights})``, or None; ValueError for anything else."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2 or not isinstance(value[1], dict):
        raise ValueError("'current' must be None or (epoch, {modality: weights})")
    epoch, drawn = value
    if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 0:
        raise ValueError(f"the epoch of the current weights is {str(epoch)[:40]}, not an epoch")
    for modality, values in drawn.items():
        if not isinstance(values, list | tuple) or not all(_weight(w) for w in values) or not sum(values) > 0:
            raise ValueError(f"the item weights of {str(modality)[:40]!r} must be finite numbers, >= 0 and not all 0")
    return int(epoch), {str(m): [float(w) for w in ws] for m, ws in drawn.items()}


def _weight(value: object) -> bool:
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    return number and math.isfinite(value) and value >= 0
