"""The example streams behind `PretextDataModule`: which task and item make example ``i`` of epoch
``e`` on each rank, skipping and replacing unusable items, and the loaders that place and resume a
pass."""

from __future__ import annotations

import bisect
import logging
import math
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from datamodules.sources.base import Source
from tasks import Example, SkipItem, Task

log = logging.getLogger(__name__)

#: An example gives up after this many unusable items in a row: the source (or task) is broken, not
#: unlucky.
MAX_CONSECUTIVE_SKIPS = 100

Placement = Callable[[], tuple[int | None, int, int]]  # () -> (epoch or None, rank, world size)
#: ``Example.meta`` key naming the curriculum stage that made an example (absent for stage 0).
STAGE_KEY = "curriculum_stage"
#: ``Example.meta`` key of a training example's source item index (its identity across epochs, for
#: per-item difficulty; the task's modality names the source).
ITEM_KEY = "source_item"


@dataclass(frozen=True)
class Feed:
    """Where the items of one modality come from in one split: a source, the indices it contributes,
    and the indices an unusable held-out item may be replaced from (``pool``, which starts with
    ``items``; None: only ``items``)."""

    source: Source
    items: range
    pool: range | None = None


@dataclass(frozen=True)
class Mix:
    """What examples are made by during one curriculum stage: the tasks and their cumulative
    weights."""

    tasks: list[Task]
    cum_weights: list[float]


def _keep(batch: list[Example]) -> list[Example]:
    """Collate that keeps a batch as built (module level, so worker processes can pickle it)."""
    return batch


def _reason(err: Exception) -> str:
    """An error as one line of a skip log: a SkipItem's own message, else its type and message."""
    text = str(err) if isinstance(err, SkipItem) else f"{type(err).__name__}: {err}"
    return " ".join(text.split())[:500]


class _Batch(list):
    """Examples plus the ``(index, reason)`` of the items skipped to make them, for the main
    process."""

    def __init__(self, examples: list[Example], skips: list[tuple[int, str]]):
        super().__init__(examples)
        self.skips = skips


class ExampleStream(IterableDataset):
    """Yields this rank's batches of examples; subclasses say which example indices make batch ``b``
    (`batch_indices`) and which source item the ``p``-th position of the epoch's item order is
    (`item_index`).

    ``epoch``, ``rank`` and ``world`` are set by `EpochLoader` before each pass; ``passes`` counts
    them. ``skipped`` counts skip events; the loader updates it in the main process, so it is exact
    with workers. A task may make several examples of one item (a question and its rewrite,
    `tasks.Task.make_examples`): training batches hold them all, one after another; held-out batches
    only the first.
    """

    stream: str = ""

    def __init__(self, feeds: dict[str, Feed], mixes: list[Mix], batch_size: int, seed: int):
        self.feeds, self.mixes, self.starts = feeds, mixes, []  # starts: see PretextDataModule.set_stage_starts
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = 0
        self.rank = 0
        self.world = 1
        self.passes = 0
        self.start = 0  # first batch of the next pass (> 0 when resuming mid-epoch)
        self.skipped = 0
        self.skip_counts: Counter = Counter()
        self._logged: set[tuple[str, int]] = set()

    def num_batches(self) -> int:
        raise NotImplementedError

    def batch_indices(self, b: int) -> Sequence[int]:
        raise NotImplementedError

    def item_index(self, position: int, modality: str) -> int:
        raise NotImplementedError

    def stage(self, i: int) -> int:
        """The curriculum stage example ``i`` of the current epoch belongs to."""
        raise NotImplementedError

    def task(self, i: int, mix: Mix, rng: random.Random) -> Task:
        """The task that makes example ``i``."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.num_batches()

    def __iter__(self) -> Iterator[_Batch]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        # the DataLoader reads workers round-robin, so batch b from worker b % K keeps the order b0,
        # b1, ...
        for b in range(self.start + worker, len(self), workers):
            skips: list[tuple[int, str]] = []
            examples = [e for i in self.batch_indices(b) for e in self.examples(int(i), skips)[: self.made]]
            yield _Batch(examples, skips)

    #: How many of the examples an item makes this stream keeps (None: all).
    made: int | None = None
    #: Whether its examples carry their source item (``ITEM_KEY``): training ones do, for per-item
    #: difficulty.
    tracks_items = False

    def examples(self, i: int, skips: list[tuple[str, int, str, str]]) -> list[Example]:
        """Example ``i`` of the current epoch (with the rewrite its task pairs it with, uid
        ``<uid>/1``); unusable items are appended to ``skips`` and replaced by the next `candidate`
        (same task, same random stream)."""
        # a str seed is hashed with SHA-512 (not hash()): the same in every process and run
        uid = f"{self.seed}:{self.stream}:{self.epoch}:{i}"
        rng = random.Random(uid)
        stage = self.stage(i)
        task = self.task(i, self.mixes[stage], rng)
        feed = self.feeds[task.modality]
        first = len(skips)
        if task.partners and len(feed.items) < 2:
            raise ValueError(f"task {task.name!r} pairs items but this split holds {len(feed.items)}")
        for attempt in range(self.attempts(feed)):
            index = self.candidate(i, attempt, task.modality)
            try:
                item = self._item(feed, index, task, rng)
            except Exception as err:  # SkipItem, or whatever else a source raises on a bad item
                kind = getattr(err, "kind", None) or "unreadable"
                skips.append((task.modality, getattr(err, "index", index), kind, _reason(err)))
                continue
            try:
                made = [task.check_answerable(e) for e in task.make_examples(item, rng)]
            except Exception as err:  # a readable item this task cannot use (too small, no valid depth, ...)
                kind = getattr(err, "kind", None) or f"rejected_by_{task.name}"
                skips.append((task.modality, index, kind, _reason(err)))
                continue
            for k, example in enumerate(made):
                example.uid = uid if k == 0 else f"{uid}/{k}"
                if stage:
                    example.meta[STAGE_KEY] = stage
                if self.tracks_items:
                    example.meta[ITEM_KEY] = index
            return made
        raise ValueError(self.exhausted(task, feed, skips[first:]))

    def attempts(self, feed: Feed) -> int:
        """How many items an example tries before the source counts as broken."""
        return MAX_CONSECUTIVE_SKIPS

    def candidate(self, i: int, attempt: int, modality: str) -> int:
        """The item the ``attempt``-th try at example ``i`` reads: the next positions of the item
        order."""
        return self.item_index(i + attempt, modality)

    def exhausted(self, task: Task, feed: Feed, skips: list[tuple[str, int, str, str]]) -> str:
        """The one-line error of an example none of whose `attempts` found a usable item."""
        last = ", ".join(f"{feed.source.describe(j)} ({why})" for _, j, _, why in skips[-3:])
        return (
            f"{len(skips)} consecutive items of {type(feed.source).__name__} could not be used by task "
            f"{task.name!r}; the source looks broken. Last failures: {last}"
        )

    @staticmethod
    def _item(feed: Feed, index: int, task: Task, rng: random.Random):
        """Item ``index``, or ``[item, *partners]`` for a task that needs other items too: partners
        are other items of this split drawn by the example's random stream (a partner's SkipItem
        names its index)."""
        item = feed.source[index]
        if not task.partners:
            return item
        others = []
        for _ in range(task.partners):
            k = rng.randrange(len(feed.items) - 1)
            partner = feed.items[k + (k >= index - feed.items.start)]  # any item but this one
            try:
                others.append(feed.source[partner])
            except Exception as err:
                skip = err if isinstance(err, SkipItem) else SkipItem(_reason(err))
                skip.index = partner
                raise skip from err
        return [item, *others]

    def note_skips(self, skips: list[tuple[str, int, str, str]]) -> None:
        """Count skip events (in total and per source and kind) and log each item the first time it
        is skipped."""
        self.skipped += len(skips)
        for modality, index, kind, reason in skips:
            self.skip_counts[type(self.feeds[modality].source).__name__, kind] += 1
            if (modality, index) not in self._logged:
                self._logged.add((modality, index))
                log.warning("skipping %s: %s", self.feeds[modality].source.describe(index), reason)


class TrainStream(ExampleStream):
    """Training examples: ``epoch_size`` per epoch, items in a fresh permutation each epoch
    (repeated in new permutations when the epoch is longer than the item list), cut into global
    batches split across ranks."""

    stream = "train"
    tracks_items = True

    def __init__(self, *args, epoch_size: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch_size = epoch_size
        self._orders: dict[tuple[str, int, int], np.ndarray] = {}
        #: ``(epoch, {modality: weight per training item})``: that epoch draws its items by these
        #: weights (`PretextDataModule.set_item_weights`); other epochs use permutations.
        self.item_weights: tuple[int, dict[str, np.ndarray]] | None = None

    def num_batches(self) -> int:
        per_global = self.batch_size * self.world
        if self.epoch_size < per_global:
            raise ValueError(
                f"an epoch of {self.epoch_size} examples holds no full global batch of {self.batch_size} x "
                f"{self.world} ranks; raise epoch_size or lower batch_size"
            )
        return self.epoch_size // per_global  # drop_last: every rank gets as many full batches

    def batch_indices(self, b: int) -> Sequence[int]:
        start = (b * self.world + self.rank) * self.batch_size
        return range(start, start + self.batch_size)

    def stage(self, i: int) -> int:
        return bisect.bisect_right(self.starts, self.epoch * self.epoch_size + i)

    def task(self, i: int, mix: Mix, rng: random.Random) -> Task:
        return rng.choices(mix.tasks, cum_weights=mix.cum_weights)[0]

    def item_index(self, position: int, modality: str) -> int:
        items = self.feeds[modality].items
        if self.item_weights is not None and self.item_weights[0] == self.epoch and modality in self.item_weights[1]:
            return items[int(self._weighted_order(modality)[position])]
        lap, offset = divmod(position, len(items))
        order = self._orders.get((modality, self.epoch, lap))
        if order is None:
            if len(self._orders) > 4 * len(self.feeds):
                self._orders.clear()
            # one source keeps the historical seed string, so single-source runs are unchanged
            name = "" if len(self.feeds) == 1 else f"{modality}:"
            seed = random.Random(self.order_seed(name, lap)).getrandbits(64)
            order = np.random.default_rng(seed).permutation(len(items))
            self._orders[modality, self.epoch, lap] = order
        return items[int(order[offset])]

    def order_seed(self, name: str, lap: int) -> str:
        """Seed string of the item permutation of ``lap`` of this epoch (``name``: the modality, or
        empty)."""
        return f"{self.seed}:order:{name}{self.epoch}:{lap}"

    def set_item_weights(self, epoch: int, weights: dict[str, np.ndarray]) -> None:
        """Draw the items of ``epoch`` by ``weights`` (one per training item of each named
        modality)."""
        self.item_weights = (epoch, weights)
        self._orders = {key: order for key, order in self._orders.items() if key[2] != -1}

    def _weighted_order(self, modality: str) -> np.ndarray:
        """This epoch's item positions drawn with replacement by the item weights (enough for every
        example and its skips)."""
        key = (modality, self.epoch, -1)
        if key not in self._orders:
            weights = self.item_weights[1][modality]
            seed = random.Random(f"{self.seed}:weighted:{modality}:{self.epoch}").getrandbits(64)
            draws = self.epoch_size + MAX_CONSECUTIVE_SKIPS
            self._orders[key] = np.random.default_rng(seed).choice(len(weights), draws, p=weights / weights.sum())
        return self._orders[key]


class HeldOutStream(ExampleStream):
    """Validation examples: one per held-out item, fixed (always epoch 0, first curriculum stage),
    made by the tasks in turn (example ``i`` by task ``i mod n``), split into contiguous per-rank
    shards whose sizes differ by at most one; the last batch of a shard may be short."""

    stream = "val"
    made = 1  # a held-out example is measured on its own, never with a rewrite

    def _shard(self) -> range:
        n = max(len(feed.items) for feed in self.feeds.values())
        return range(self.rank * n // self.world, (self.rank + 1) * n // self.world)

    def num_batches(self) -> int:
        return math.ceil(len(self._shard()) / self.batch_size)

    def batch_indices(self, b: int) -> Sequence[int]:
        return self._shard()[b * self.batch_size : (b + 1) * self.batch_size]

    def attempts(self, feed: Feed) -> int:
        return min(MAX_CONSECUTIVE_SKIPS, len(feed.pool or feed.items))  # each held-out item once at most

    def candidate(self, i: int, attempt: int, modality: str) -> int:
        """Example ``i``'s own item; when unusable, the spare items of the held-out pool (those no
        example uses, each example starting at another one), then the other examples' items."""
        feed = self.feeds[modality]
        items = feed.items
        spare = (feed.pool or items)[len(items) :]
        if attempt == 0:
            return items[i % len(items)]
        if attempt <= len(spare):
            return spare[(i + attempt - 1) % len(spare)]
        return items[(i + attempt - len(spare)) % len(items)]

    def exhausted(self, task: Task, feed: Feed, skips: list[tuple[str, int, str, str]]) -> str:
        names = list(dict.fromkeys(feed.source.describe(j) for _, j, _, _ in skips))
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        return (
            f"no usable held-out item for task {task.name!r}: all {len(names)} tried of "
            f"{type(feed.source).__name__} are unusable ({shown}; the first: {skips[0][3]}). Fix or remove "
            f"them, give a {self.stream}_source, or set {self.stream}_size: 0"
        )

    def stage(self, i: int) -> int:
        return 0  # held-out examples never change

    def task(self, i: int, mix: Mix, rng: random.Random) -> Task:
        return mix.tasks[i % len(mix.tasks)]  # every task gets an equal share of the held-out items


class TestStream(HeldOutStream):
    """Test examples: made as the validation ones are, from the test items, under a random stream of
    their own."""

    stream = "test"


class EpochLoader(DataLoader):
    """A DataLoader that tells its dataset the epoch, rank and world size before each pass (so
    before its non-persistent workers start), and counts and logs skipped items in the main
    process."""

    def __init__(self, dataset: ExampleStream, placement: Placement | None = None, **kwargs):
        kwargs.setdefault("batch_size", None)
        kwargs.setdefault("collate_fn", _keep)
        kwargs["persistent_workers"] = False  # persistent workers would keep the epoch they started with
        super().__init__(dataset, **kwargs)
        self.placement = placement or (lambda: (None, 0, 1))

    def _place(self) -> int | None:
        epoch, self.dataset.rank, self.dataset.world = self.placement()
        return epoch

    def __len__(self) -> int:
        self._place()
        return super().__len__()

    def __iter__(self) -> Iterator[list[Example]]:
        epoch = self._place()
        # without a trainer every pass over the dataset (from any loader of this module) is a new
        # epoch
        epoch = self.dataset.passes if epoch is None else epoch
        self.dataset.epoch, self.dataset.start = self._start(epoch)
        self.dataset.passes += 1
        return self._unwrap(super().__iter__())

    def _start(self, epoch: int) -> tuple[int, int]:
        """``(epoch, batch)`` a pass asked for ``epoch`` starts at: its first batch unless a
        restored position says otherwise."""
        return epoch, 0

    def _unwrap(self, batches: Iterator[_Batch]) -> Iterator[list[Example]]:
        for batch in batches:
            self.dataset.note_skips(batch.skips)
            yield list(batch)


class ResumableLoader(EpochLoader):
    """The training loader: Lightning stores its `state_dict` in checkpoints, so a run resumed
    mid-epoch continues with the next batch instead of replaying the epoch from its start."""

    def __init__(self, dataset: ExampleStream, placement: Placement, progress: Callable[[], int], **kwargs):
        super().__init__(dataset, placement, **kwargs)
        self.progress = progress
        self._resume: tuple[int, int] | None = None

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.dataset.epoch, "batch": self.progress()}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resume = (state["epoch"], state["batch"])

    def _start(self, epoch: int) -> tuple[int, int]:
        resume, self._resume = self._resume, None  # a restored position applies to one pass only
        if resume is None or resume[0] != epoch:
            return epoch, 0
        if resume[1] >= len(self):
            # saved at the epoch's last batch: Lightning iterates before it moves on to the next
            # epoch
            return epoch + 1, 0
        return resume
