"""`PretextDataModule`: a raw-media source composed with pretext tasks into reproducible batches of
examples.

Example ``i`` of epoch ``e`` is a pure function of ``(seed, e, i)`` (and of the curriculum stage
starts, when a `callbacks.Curriculum` drives it) whatever the number of ranks and workers; an item
that cannot be used is skipped, counted, logged once and replaced, so batches keep their size.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch
from lightning import LightningDataModule
from torch.utils.data import DataLoader

from datamodules.refill import RefillStream
from datamodules.sources.base import Source
from datamodules.splits import by_modality, check_modalities, split_feeds
from datamodules.streams import (
    STAGE_KEY,
    EpochLoader,
    ExampleStream,
    HeldOutStream,
    Mix,
    ResumableLoader,
    TestStream,
    TrainStream,
)
from tasks import Example, Reward, Task
from tasks.tools.base import Toolbox


class PretextDataModule(LightningDataModule):
    """Batches of pretext examples: items of ``source`` made into prompts with checkable answers by
    ``tasks``.

    A batch is a ``list[Example]`` of exactly ``batch_size`` examples per rank (PIL images do not
    stack; the policy encodes). Example ``i`` of epoch ``e`` depends only on ``(seed, e, i)``: its
    task is drawn by ``weights``, its item is position ``i`` of a per-epoch permutation of its
    source's training items. Global batch ``b`` holds examples ``[b * G, (b + 1) * G)`` with ``G =
    batch_size * world_size``, rank ``r`` the ``r``-th slice, so results do not depend on the number
    of ranks or workers. An item the source or task cannot use (`tasks.SkipItem`) is skipped,
    counted, logged once and replaced by the next item of the permutation.

    Validation holds out ``val_size`` items, each giving one fixed example (a random stream of its
    own). The tasks take turns (held-out example ``i`` is made by task ``i mod n``), so each task's
    held-out accuracy is measured on an equal share whatever the training weights. They are split
    across ranks in contiguous shards without padding; with ``val_size`` divisible by ``world_size *
    batch_size`` every rank runs the same number of full batches. The test set (``zoo test``) is
    made the same way from ``test_size`` other items: without a ``test_source`` they are the items
    just before the validation items of ``source`` (training items, then test, then validation:
    disjoint by construction), under a random stream of their own; set ``test_size`` when training
    too, or the test items are trained on.

    A curriculum (`callbacks.Curriculum`) adds stages with other weights or task options
    (`set_curriculum`) and says where in training each begins (`set_stage_starts`); example ``i`` of
    epoch ``e`` is then a function of ``(seed, e, i)`` and those starts. Validation always uses the
    tasks as configured here.

    Args:
        source: Raw media items: one source, or one per modality when the tasks take several
            (Spatial-SSRL mixes image and RGB-D tasks); each task reads the source of its modality,
            through a per-epoch permutation of that source's training items.
        tasks: One task or several; each example is made by one of them.
        weights: Relative frequency of each task (positive, one per task); ``None`` means equal.
        batch_size: Examples per batch on each rank.
        val_source: Items to validate on, one source per modality at most. ``None`` (or no source of
            a modality) holds out the last ``val_size`` items of that modality's ``source``.
        val_size: Number of validation items per modality (at most the length of ``val_source``); 0
            disables validation.
        test_source: Items to test on (``zoo test``), one source per modality at most; ``None``
            holds out ``test_size`` items of ``source`` before the validation items. Give one other
            than ``val_source``.
        test_size: Number of test items per modality (at most the length of ``test_source``); 0: no
            test split (``zoo test`` then stops with a message saying how to declare one).
        num_workers: DataLoader worker processes; the batches are the same for any number.
        seed: Selects the permutations, task draws and task randomness.
        epoch_size: Training examples per epoch (all ranks together); ``None`` means one per
            training item (of all sources together). May exceed the number of items, or cut a large
            synthetic source into short epochs.
    """

    def __init__(
        self,
        source: Source | list[Source],
        tasks: Task | list[Task],
        weights: list[float] | None = None,
        batch_size: int = 8,
        val_source: Source | list[Source] | None = None,
        val_size: int = 64,
        test_source: Source | list[Source] | None = None,
        test_size: int = 0,
        num_workers: int = 0,
        seed: int = 0,
        epoch_size: int | None = None,
    ):
        super().__init__()
        task_list = [tasks] if isinstance(tasks, Task) else list(tasks)
        self._tasks = _by_name(task_list)
        sources = by_modality(source, "source")
        held_out = {"val": by_modality(val_source, "val_source"), "test": by_modality(test_source, "test_source")}
        check_modalities(sources, held_out, task_list)
        self._mixes = [Mix(task_list, _cumulative(weights, len(task_list)))]
        minima = {
            "batch_size": (batch_size, 1),
            "val_size": (val_size, 0),
            "test_size": (test_size, 0),
            "num_workers": (num_workers, 0),
            "epoch_size": (1 if epoch_size is None else epoch_size, 1),
        }
        for name, (value, least) in minima.items():
            if value < least:
                raise ValueError(f"{name} must be >= {least}, got {value}")
        self.source = source
        self.val_source = val_source
        self.test_source = test_source
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.seed = seed
        self._feeds = split_feeds(sources, held_out, {"val": val_size, "test": test_size})
        self.epoch_size = sum(len(f.items) for f in self._feeds["train"].values()) if epoch_size is None else epoch_size
        self._streams: dict[str, ExampleStream] = {}
        self._starts: list[int] = []
        self._item_weights: tuple[int, dict[str, np.ndarray]] | None = None

    @property
    def tasks(self) -> dict[str, Task]:
        """The tasks by name."""
        return dict(self._tasks)

    @property
    def skipped(self) -> int:
        """Skip events so far, training and validation together (counted as batches reach this
        process)."""
        return sum(stream.skipped for stream in self._streams.values())

    @property
    def skip_counts(self) -> dict[tuple[str, str], int]:
        """Skip events so far by ``(source class, kind)``; kind is ``unreadable`` (the source could
        not load the item), ``rejected_by_<task>`` (the task could not make an example of it) or the
        kind a source's filter names (`tasks.SkipItem`, e.g. ``too_short``)."""
        counts: Counter = Counter()
        for stream in self._streams.values():
            counts.update(stream.skip_counts)
        return dict(counts)

    @property
    def uses_tools(self) -> bool:
        """Whether a task of this data module has tools: its rollouts are multi-turn."""
        return any(task.toolbox is not None for mix in self._mixes for task in mix.tasks)

    @property
    def max_turns(self) -> int:
        """The most turns any task of this data module allows (1 without tools)."""
        return max([1, *(task.toolbox.max_turns for mix in self._mixes for task in mix.tasks if task.toolbox)])

    def toolbox(self, example: Example) -> Toolbox | None:
        """The tools and turn limits of the task that made ``example`` (None: one turn)."""
        return self._task_of(example).toolbox

    def verify(self, example: Example, completion: str) -> Reward:
        """Reward ``completion`` with the verifier of the task that made ``example``."""
        return self._task_of(example).verify(example, completion)

    def verify_group(self, examples: list[Example], completions: list[list[str]]) -> list[list[Reward]]:
        """Rewards of ``completions[b]``, the G completions of ``examples[b]``: while training, each
        task scores all its examples of the batch together (`tasks.Task.verify_group`: a
        ``self_reward`` compares completions with each other); otherwise (validation, test) each
        against its answer."""
        training = getattr(self.trainer, "training", True)  # no trainer: a caller scoring rollouts itself
        rows: dict[int, list[int]] = {}  # one entry per task object (curriculum stages copy tasks)
        for b, example in enumerate(examples):
            rows.setdefault(id(self._task_of(example)), []).append(b)
        out: list[list[Reward]] = [[] for _ in examples]
        for group in rows.values():
            task = self._task_of(examples[group[0]])
            chosen = [examples[b] for b in group]
            texts = [completions[b] for b in group]
            scored = (
                task.verify_group(chosen, texts)
                if training
                else [[task.verify(e, text) for text in g] for e, g in zip(chosen, texts, strict=True)]
            )
            for b, rewards in zip(group, scored, strict=True):
                out[b] = rewards
        return out

    def canonical_answer(self, example: Example, completion: str):
        """The answer ``completion`` states as the task of ``example`` reads it (the ballot of
        ``maj@k``: `tasks.Task.canonical_answer`); None when it states no valid one."""
        return self._task_of(example).canonical_answer(example, completion)

    def demonstration(self, example: Example) -> str:
        """What an expert writes for ``example`` (the SFT target): its task's
        `tasks.Task.demonstration`."""
        return self._task_of(example).demonstration(example)

    def _task_of(self, example: Example) -> Task:
        mix = self._mixes[example.meta.get(STAGE_KEY, 0)]
        task = next((t for t in mix.tasks if t.name == example.task), None)
        if task is None:
            known = sorted(self._tasks)
            raise KeyError(f"example made by unknown task {example.task!r}; this data module has {known}")
        return task

    def set_curriculum(self, stages: Sequence[tuple[list[float] | None, dict[str, dict]]]) -> None:
        """Declare the curriculum stages after the first: ``(weights, options)`` each, where
        ``weights`` (None: unchanged) replaces the task weights and ``options`` maps task names to
        option changes (``{"jigsaw": {"rows": 3, "cols": 3}}``), added to those of the stages
        before. Bad names, options or weights fail here, before training."""
        mixes = self._mixes[:1]
        weights = None
        changes = {name: {} for name in self._tasks}
        for new_weights, options in stages:
            unknown = set(options) - set(self._tasks)
            if unknown:
                raise ValueError(f"curriculum names unknown tasks {sorted(unknown)}; known: {sorted(self._tasks)}")
            for name, option in options.items():
                changes[name] = {**changes[name], **option}
            weights = weights if new_weights is None else new_weights
            tasks = [with_options(t, **changes[t.name]) if changes[t.name] else t for t in self._tasks.values()]
            cum = mixes[0].cum_weights if weights is None else _cumulative(weights, len(tasks))
            mixes.append(Mix(tasks, cum))
        self._mixes = mixes
        self.set_stage_starts([])

    def set_stage_starts(self, starts: Sequence[int]) -> None:
        """Where each curriculum stage after the first begins, as a training example position
        (`position`); stages past the end of ``starts`` have not begun."""
        if len(starts) >= len(self._mixes) or list(starts) != sorted(starts) or any(s < 0 for s in starts):
            raise ValueError(f"need at most {len(self._mixes) - 1} non-decreasing starts >= 0, got {starts}")
        self._starts = list(starts)
        for stream in self._streams.values():
            stream.mixes = self._mixes
            stream.starts = self._starts if stream.stream in ("train", "refill") else []

    @property
    def training_items(self) -> dict[str, int]:
        """Training items per modality (what `set_item_weights` weighs)."""
        return {modality: len(feed.items) for modality, feed in self._feeds["train"].items()}

    def item_splits(self) -> dict[str, tuple[list[int], list[int]]]:
        """Per modality, the indices into its ``source`` of the training items and of the held-out
        ones (none when a ``val_source`` holds those)."""
        splits = {}
        for modality, feed in self._feeds["train"].items():
            held = self._feeds["val"][modality]
            splits[modality] = (list(feed.items), list(held.items) if held.source is feed.source else [])
        return splits

    def set_item_weights(self, epoch: int, weights: dict[str, Sequence[float]]) -> None:
        """Draw the training items of ``epoch`` (each example's item, with replacement) by
        ``weights``: one non-negative weight per training item (`training_items`) for each named
        modality; other modalities and epochs keep their permutations (`callbacks.DifficultySampler`
        sets these)."""
        arrays = {}
        for modality, values in weights.items():
            array = np.asarray(values, dtype=np.float64)
            expected = self.training_items.get(modality)
            if expected is None or array.shape != (expected,):
                raise ValueError(
                    f"item weights for {modality!r}: need one per training item ({expected}), got {array.shape}"
                )
            if not np.isfinite(array).all() or (array < 0).any() or array.sum() <= 0:
                raise ValueError(f"item weights for {modality!r} must be finite, >= 0, and not all 0")
            arrays[modality] = array
        self._item_weights = (epoch, arrays)
        if "train" in self._streams:
            self._streams["train"].set_item_weights(epoch, arrays)

    def position(self, epoch: int, batch: int) -> int:
        """The training position of the first example of ``batch`` in ``epoch``: ``epoch *
        epoch_size`` plus the examples of the earlier global batches (batch size x world size)."""
        world = self._placement()[2]
        return epoch * self.epoch_size + batch * self.batch_size * world

    def refill(self, key: int, round: int) -> list[Example]:
        """This rank's prompts of refill round ``round`` (1, 2, ...) of training batch ``key``, for
        dynamic sampling (`zoo.grpo.GRPOMixin` ``refill_rounds``): ``batch_size`` examples, this
        rank's slice of a global round of ``batch_size`` x world size, from a stream of their own
        (`datamodules.refill.RefillStream`: training items, tasks of the current curriculum stage).
        Each is a pure function of ``(seed, key, round, position in the round)``; the training
        batches and epochs are the same with or without refills."""
        stream = self._stream("refill")
        epoch, stream.rank, stream.world = self._placement()
        stream.epoch = key
        stream.start = round - 1
        stream.position = self.position(epoch or 0, self._batches_done())
        batch = next(iter(stream))  # built here, in the main process
        stream.note_skips(batch.skips)
        return list(batch)

    def train_dataloader(self) -> DataLoader:
        return ResumableLoader(self._stream("train"), self._placement, self._batches_done, num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader | list:
        if not any(feed.items for feed in self._feeds["val"].values()):
            return []  # Lightning skips validation for an empty list
        return self._held_out_loader("val")

    def test_dataloader(self) -> DataLoader:
        if not any(feed.items for feed in self._feeds["test"].values()):
            raise ValueError(
                "this data module has no test split: set data.init_args.test_size (items of source "
                "held out from training and validation; set it when training too) or "
                "data.init_args.test_source; zoo validate scores the validation split"
            )
        return self._held_out_loader("test")

    def _held_out_loader(self, split: str) -> DataLoader:
        placement = lambda: (0, *self._placement()[1:])  # held-out examples never change
        return EpochLoader(self._stream(split), placement, num_workers=self.num_workers)

    def _stream(self, split: str) -> ExampleStream:
        """The dataset of a split, built once so that its skip counts accumulate over epochs."""
        if split not in self._streams:
            feeds = self._feeds["train" if split == "refill" else split]  # refill draws more training items
            common = dict(feeds=feeds, mixes=self._mixes, batch_size=self.batch_size, seed=self.seed)
            if split == "train":
                stream = TrainStream(epoch_size=self.epoch_size, **common)
                if self._item_weights is not None:
                    stream.set_item_weights(*self._item_weights)
            elif split == "refill":
                stream = RefillStream(**common)
            else:
                stream = HeldOutStream(**common) if split == "val" else TestStream(**common)
            self._streams[split] = stream
            self.set_stage_starts(self._starts)
        return self._streams[split]

    def _batches_done(self) -> int:
        """Training batches of the current epoch already trained on (what a checkpoint has seen)."""
        if self.trainer is None:
            return 0
        return self.trainer.fit_loop.epoch_loop.batch_progress.current.processed

    def _placement(self) -> tuple[int | None, int, int]:
        """``(epoch, rank, world size)`` from the trainer, else torch.distributed, else one process;
        the epoch is None without a trainer (each pass over the dataset is then a new epoch)."""
        if self.trainer is not None:
            return self.trainer.current_epoch, self.trainer.global_rank, self.trainer.world_size
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return None, torch.distributed.get_rank(), torch.distributed.get_world_size()
        return None, 0, 1


def _by_name(tasks: list[Task]) -> dict[str, Task]:
    if not tasks:
        raise ValueError("tasks is empty: give at least one Task")
    by_name: dict[str, Task] = {}
    for task in tasks:
        if task.name in by_name:
            raise ValueError(f"two tasks are named {task.name!r}; verify() finds tasks by name")
        by_name[task.name] = task
    return by_name


def with_options(task: Task, **changes) -> Task:
    """A new task of the same class with some ``__init__`` options changed (validated again by
    ``__init__``); the others are read from the attributes of the same name, which every task
    keeps."""
    names = {
        name
        for cls in type(task).__mro__
        if "__init__" in vars(cls) and issubclass(cls, Task)
        for name, param in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
    }
    unknown = set(changes) - names
    if unknown:
        raise ValueError(f"{type(task).__name__} has no options {sorted(unknown)}; it has {sorted(names)}")
    missing = sorted(n for n in names - set(changes) if not hasattr(task, n))
    if missing:
        raise ValueError(f"{type(task).__name__} does not keep options {missing} as attributes; cannot copy it")
    return type(task)(**{name: getattr(task, name) for name in names} | changes)


def _cumulative(weights: list[float] | None, n: int) -> list[float]:
    """Normalised cumulative weights for `random.Random.choices`."""
    weights = [1.0] * n if weights is None else list(weights)
    if len(weights) != n:
        raise ValueError(f"weights has {len(weights)} entries for {n} tasks; give one per task")
    if not all(math.isfinite(w) and w > 0 for w in weights):
        raise ValueError(f"weights must be positive and finite, got {weights}")
    total = sum(weights)
    return list(itertools.accumulate(w / total for w in weights))
