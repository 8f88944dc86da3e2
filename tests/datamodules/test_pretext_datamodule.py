"""PretextDataModule: determinism, epochs, rank and worker splits, held-out data, task mixing,
skipping."""

import ast
import logging
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import datamodules
import tasks
from datamodules import PretextDataModule, Source, SyntheticScenes
from tasks import Example, SkipItem, Task


class Numbers(Source):
    """Item ``i`` is the integer ``i + offset``; items in ``bad`` cannot be decoded."""

    modality = "image"

    def __init__(self, n, offset=0, bad=()):
        self.n, self.offset, self.bad = n, offset, set(bad)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index in self.bad:
            raise SkipItem("corrupt")
        return index + self.offset

    def describe(self, index):
        return f"number-{index + self.offset}"


class Tag(Task):
    """Repeat a number: the item (or an image item's pixel sum), with one draw of the example's
    random stream in ``meta`` so that examples can be compared."""

    name = "tag"
    modality = "image"

    def make_example(self, item, rng):
        number = item if isinstance(item, int) else int(np.asarray(item, dtype=np.int64).sum())
        messages = self.user_message([{"type": "text", "text": str(number)}], "Repeat the number.")
        return Example(messages=messages, answer=str(number), task=self.name, meta={"draw": rng.random()})

    def answer_text(self, example):
        return example.answer

    def score(self, example, answer):
        return {"accuracy": float(answer == example.answer)}


class OtherTag(Tag):
    name = "other"


class OddHater(Tag):
    name = "odd_hater"

    def make_example(self, item, rng):
        if isinstance(item, int) and item % 2:  # cannot use odd numbers
            raise SkipItem("odd")
        return super().make_example(item, rng)


def key(example):
    return example.task, example.answer, example.meta["draw"]


def keys(batches):
    return [[key(e) for e in batch] for batch in batches]


def item(example):
    return int(example.answer)


def module(n=40, attach=None, **kwargs):
    kwargs.setdefault("val_size", 8)
    kwargs.setdefault("batch_size", 4)
    dm = PretextDataModule(Numbers(n), kwargs.pop("tasks", Tag()), **kwargs)
    if attach is not None:
        dm.trainer = SimpleNamespace(**attach)  # what the data module reads from a real trainer
    return dm


def epoch(dm, split="train"):
    loader = dm.train_dataloader() if split == "train" else dm.val_dataloader()
    return list(loader)


def test_batches_are_full_lists_of_examples_and_len_matches():
    dm = module(n=40, val_size=6, batch_size=4)  # 34 training items: 8 full batches, 2 dropped
    loader = dm.train_dataloader()
    batches = list(loader)
    assert len(loader) == len(batches) == 34 // 4
    assert all(type(b) is list and len(b) == 4 and all(isinstance(e, Example) for e in b) for b in batches)


def test_one_epoch_visits_every_training_item_once():
    dm = module(n=40, val_size=8, batch_size=4)
    items = [item(e) for b in epoch(dm) for e in b]
    assert sorted(items) == list(range(32))


def test_two_instances_give_identical_batches():
    assert keys(epoch(module(seed=3))) == keys(epoch(module(seed=3)))


def test_seed_changes_examples():
    assert keys(epoch(module(seed=0))) != keys(epoch(module(seed=1)))


def test_epochs_differ_and_follow_the_trainer_epoch():
    dm = module()
    loader = dm.train_dataloader()
    first, second = keys(loader), keys(loader)  # no trainer: each pass is a new epoch
    assert first != second
    assert [b[0] for b in first] != [b[0] for b in second]  # a new permutation, not only new draws
    at_epoch_1 = module(attach=dict(current_epoch=1, global_rank=0, world_size=1))
    assert keys(epoch(at_epoch_1)) == second
    assert keys(epoch(at_epoch_1)) == second  # the trainer's epoch, not a pass counter


@pytest.mark.parametrize("workers", [0, 2])
def test_a_restored_loader_continues_mid_epoch(workers):
    full = keys(epoch(module(attach=dict(current_epoch=0, global_rank=0, world_size=1), num_workers=workers)))
    dm = module(attach=dict(current_epoch=0, global_rank=0, world_size=1), num_workers=workers)
    loader = dm.train_dataloader()
    loader.load_state_dict({"epoch": 0, "batch": 3})
    assert keys(loader) == full[3:]  # the rest of the epoch, in order
    assert keys(loader) == full  # the restored position applies to one pass only
    loader.load_state_dict({"epoch": 5, "batch": 3})  # saved in another epoch: start from the top
    assert keys(loader) == full


def test_epoch_size_sets_the_number_of_batches_and_may_exceed_the_items():
    short = module(n=40, epoch_size=10)
    assert len(short.train_dataloader()) == len(epoch(short)) == 2
    long = module(n=12, val_size=2, epoch_size=40)  # 10 items seen 4 times
    counts = Counter(item(e) for b in epoch(long) for e in b)
    assert counts == dict.fromkeys(range(10), 4)
    with pytest.raises(ValueError, match="global batch"):
        two_ranks = module(epoch_size=6, attach=dict(current_epoch=0, global_rank=0, world_size=2))
        len(two_ranks.train_dataloader())


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_split_each_global_batch(world):
    single = keys(epoch(module(n=100, batch_size=3 * world)))
    per_rank = []
    for rank in range(world):
        dm = module(n=100, batch_size=3, attach=dict(current_epoch=0, global_rank=rank, world_size=world))
        loader = dm.train_dataloader()
        per_rank.append(keys(loader))
        assert len(loader) == len(per_rank[-1]) == len(single)
    joined = [sum((per_rank[r][b] for r in range(world)), []) for b in range(len(single))]
    assert joined == single


def test_workers_give_the_same_batches_in_the_same_order():
    serial = module(n=60, num_workers=0)
    parallel = module(n=60, num_workers=2)
    loader = parallel.train_dataloader()
    batches = keys(loader)
    assert batches == keys(epoch(serial))
    assert len(loader) == len(batches)
    assert keys(loader) == keys(serial.train_dataloader())  # second epoch as well (the trainerless counter)
    assert keys(epoch(parallel, "val")) == keys(epoch(serial, "val"))


def test_held_out_tail_is_disjoint_from_training_and_fixed():
    dm = module(n=40, val_size=8)
    train = {item(e) for _ in range(3) for b in epoch(dm) for e in b}
    val_batches = epoch(dm, "val")
    val = [item(e) for b in val_batches for e in b]
    assert sorted(val) == list(range(32, 40))
    assert train.isdisjoint(val)
    assert keys(val_batches) == keys(epoch(dm, "val"))  # validation does not change with the epoch
    with pytest.raises(ValueError, match="no test split: set data.init_args.test_size"):
        dm.test_dataloader()  # no test split declared: never the validation items under another name


def test_the_test_split_is_disjoint_from_training_and_validation_by_construction():
    dm = module(n=40, val_size=8, test_size=6, batch_size=2)  # 26 training items: 13 batches an epoch
    train = [item(e) for b in epoch(dm) for e in b]
    val = [item(e) for b in epoch(dm, "val") for e in b]
    test_batches = list(dm.test_dataloader())
    test = [item(e) for b in test_batches for e in b]
    assert (
        sorted(train) == list(range(26)) and sorted(test) == list(range(26, 32)) and sorted(val) == list(range(32, 40))
    )
    assert {e.uid.split(":")[1] for b in test_batches for e in b} == {"test"}  # a random stream of its own
    assert keys(dm.test_dataloader()) == keys(test_batches)  # fixed, like validation
    # declaring a test split moves training items only: validation stays the same examples
    assert keys(epoch(module(n=40, val_size=8, batch_size=2), "val")) == keys(epoch(dm, "val"))
    with pytest.raises(ValueError, match="val_size=8 \\+ test_size=32 would hold out all 40 items"):
        module(n=40, val_size=8, test_size=32)


def test_test_source_keeps_the_training_items_and_uses_its_first_items():
    dm = module(n=20, val_size=4, test_source=Numbers(50, offset=1000), test_size=5)
    assert sorted(item(e) for b in epoch(dm) for e in b) == list(range(16))
    assert sorted(item(e) for b in dm.test_dataloader() for e in b) == list(range(1000, 1005))


def test_val_source_keeps_all_training_items_and_uses_its_first_items():
    dm = PretextDataModule(Numbers(20), Tag(), batch_size=4, val_source=Numbers(50, offset=1000), val_size=6)
    assert sorted(item(e) for b in epoch(dm) for e in b) == list(range(20))
    assert sorted(item(e) for b in epoch(dm, "val") for e in b) == list(range(1000, 1006))
    small = PretextDataModule(Numbers(20), Tag(), val_source=Numbers(3, offset=1000), val_size=64)
    assert len([e for b in epoch(small, "val") for e in b]) == 3


def test_validation_has_a_random_stream_of_its_own():
    dm = PretextDataModule(Numbers(8), Tag(), batch_size=8, val_source=Numbers(8), val_size=8)
    train = {e.meta["draw"] for e in epoch(dm)[0]}
    val = {e.meta["draw"] for e in epoch(dm, "val")[0]}
    assert train.isdisjoint(val)


def test_validation_is_sharded_across_ranks_without_padding():
    every = [key(e) for b in epoch(module(n=40, val_size=11, batch_size=2), "val") for e in b]
    shards = []
    for rank in range(3):
        placement = dict(current_epoch=5, global_rank=rank, world_size=3)
        dm = module(n=40, val_size=11, batch_size=2, attach=placement)
        loader = dm.val_dataloader()
        batches = list(loader)
        assert len(loader) == len(batches)
        assert all(1 <= len(b) <= 2 for b in batches)
        shards.append([key(e) for b in batches for e in b])
    assert sum(shards, []) == every
    assert sorted(len(s) for s in shards) == [3, 4, 4]


def test_hold_out_errors_and_val_size_zero():
    with pytest.raises(ValueError, match="leaving none"):
        module(n=8, val_size=8)
    assert module(n=8, val_size=0).val_dataloader() == []


def test_weights_mix_tasks_in_proportion():
    dm = module(n=400, val_size=0, tasks=[Tag(), OtherTag()], weights=[3, 1])
    counts = Counter(e.task for b in epoch(dm) for e in b)
    assert counts.keys() == {"tag", "other"}
    assert 0.68 < counts["tag"] / 400 < 0.82
    even = Counter(e.task for b in epoch(module(n=400, val_size=0, tasks=[Tag(), OtherTag()])) for e in b)
    assert 0.4 < even["tag"] / 400 < 0.6


@pytest.mark.parametrize("weights", [[1.0], [1.0, 0.0], [1.0, -1.0], [1.0, float("nan")], [1, 2, 3]])
def test_bad_weights_are_refused(weights):
    with pytest.raises(ValueError, match="weights"):
        module(tasks=[Tag(), OtherTag()], weights=weights)


def test_task_names_and_verify_dispatch():
    dm = module(tasks=[Tag(), OtherTag()])
    assert set(dm.tasks) == {"tag", "other"}
    example = epoch(dm)[0][0]
    task = dm.tasks[example.task]
    assert dm.verify(example, task.render_answer(example)).total == pytest.approx(task.max_reward)
    assert dm.verify(example, "<answer>nonsense</answer>").parts["accuracy"] == 0.0
    stranger = Example(messages=[], answer="1", task="nope")
    with pytest.raises(KeyError, match="nope.*other.*tag"):
        dm.verify(stranger, "1")
    with pytest.raises(ValueError, match="named 'tag'"):
        module(tasks=[Tag(), Tag()])


def test_modality_mismatch_is_refused():
    class Audio(Numbers):
        modality = "audio"

    with pytest.raises(ValueError, match="audio"):
        PretextDataModule(Audio(10), Tag(), val_size=2)


def test_bad_source_items_are_skipped_counted_logged_once_and_replaced(caplog):
    bad = {3, 7, 8, 20}
    dm = PretextDataModule(Numbers(30, bad=bad), Tag(), batch_size=5, val_size=0)
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        first, second = epoch(dm), epoch(dm)
    for batches in (first, second):
        assert len(batches) == 6 and all(len(b) == 5 for b in batches)
        assert bad.isdisjoint(item(e) for b in batches for e in b)
    assert dm.skipped >= 2 * len(bad)  # each bad item is met at least once per epoch
    assert dm.skip_counts == {("Numbers", "unreadable"): dm.skipped}
    for index in bad:
        assert sum(f"number-{index}:" in r.getMessage() for r in caplog.records) == 1
    again = PretextDataModule(Numbers(30, bad=bad), Tag(), batch_size=5, val_size=0)
    assert keys(epoch(again)) == keys(first)  # substitution is deterministic


def test_task_skips_are_replaced_with_the_same_task():
    dm = module(n=60, val_size=0, tasks=[OddHater()], batch_size=6)
    batches = epoch(dm)
    assert all(len(b) == 6 for b in batches)
    assert all(item(e) % 2 == 0 for b in batches for e in b)
    assert dm.skipped >= 30
    ((source, kind),) = dm.skip_counts
    assert kind == f"rejected_by_{OddHater.name}"


def test_skips_counted_with_workers(caplog):
    bad = {1, 2, 5, 11}
    serial = PretextDataModule(Numbers(24, bad=bad), Tag(), batch_size=4, val_size=0)
    parallel = PretextDataModule(Numbers(24, bad=bad), Tag(), batch_size=4, val_size=0, num_workers=2)
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        assert keys(epoch(parallel)) == keys(epoch(serial))
    assert parallel.skipped == serial.skipped >= len(bad)
    assert parallel.skip_counts == serial.skip_counts


def test_a_broken_source_raises_instead_of_looping():
    dm = PretextDataModule(Numbers(10, bad=range(10)), Tag(), batch_size=2, val_size=0)
    with pytest.raises(ValueError, match="consecutive.*broken"):
        epoch(dm)


def test_argument_validation():
    with pytest.raises(ValueError, match="batch_size"):
        module(batch_size=0)
    with pytest.raises(ValueError, match="epoch_size"):
        module(epoch_size=0)
    with pytest.raises(ValueError, match="empty"):
        module(tasks=[])


def test_datamodules_do_not_import_zoo_or_callbacks():
    package = Path(datamodules.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            roots = {name.split(".")[0] for name in names}
            assert roots.isdisjoint({"zoo", "callbacks"}), f"{path} imports {roots}"


def test_with_the_real_rotation_task():
    rotation = getattr(tasks, "Rotation", None)
    if rotation is None:
        pytest.skip("tasks.Rotation is not written yet")
    dm = PretextDataModule(SyntheticScenes(size=40, image_size=56), rotation(), batch_size=4, val_size=8)
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 4
    for example in batch:
        best = dm.verify(example, dm.tasks[example.task].render_answer(example))
        assert best.total == pytest.approx(dm.tasks[example.task].max_reward)
    val = [e.answer for e in epoch(dm, "val")[0]]
    assert val == [e.answer for e in epoch(dm, "val")[0]]
    assert len({str(e.answer) for b in epoch(dm) for e in b}) > 1  # angles vary


def test_example_is_a_pure_function_of_seed_epoch_index():
    # batch b of epoch e with batch size B holds examples [b*B, (b+1)*B): the same example index
    # must give the same example whatever the batch size
    small = [key(e) for b in epoch(module(n=48, batch_size=4)) for e in b]
    large = [key(e) for b in epoch(module(n=48, batch_size=8)) for e in b]
    assert small == large
