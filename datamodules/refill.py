"""The refill stream of dynamic sampling (DAPO): more training prompts for a batch whose groups have
equal rewards, drawn without touching the training batches or epochs."""

from __future__ import annotations

import bisect

from datamodules.streams import TrainStream


class RefillStream(TrainStream):
    """Refill prompts: "epoch" ``e`` is the key of the batch being refilled, batch ``b`` its refill
    round ``b + 1``, split over ranks like a training batch (rank ``r`` takes the ``r``-th slice of
    the global round). Items come from the training split in a permutation of their own per key,
    tasks are drawn by the weights of the curriculum stage of the batch being refilled
    (``position``). So a refill example is a pure function of ``(seed, key, round, position in the
    global round)``: any number of ranks or a resumed run draw the same."""

    stream = "refill"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, epoch_size=1, **kwargs)  # an epoch is one batch's refill rounds: no size
        self.position = 0  # training position of the batch being refilled (its curriculum stage)

    def num_batches(self) -> int:
        return self.start + 1  # a pass yields the round asked for (`start`) only

    def stage(self, i: int) -> int:
        return bisect.bisect_right(self.starts, self.position)

    def order_seed(self, name: str, lap: int) -> str:
        return f"{self.seed}:refill-order:{name}{self.epoch}:{lap}"
