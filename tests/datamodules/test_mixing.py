"""Task mixing in PretextDataModule: per-example weighted draws, validation covering every task,
partner items for pair tasks, and curriculum stages (weights and task options that change at a
training position)."""

import logging
from collections import Counter

import pytest

import tasks
from datamodules import PretextDataModule
from datamodules.base import with_options
from datamodules.streams import STAGE_KEY
from tasks import Example, Jigsaw, Task
from tests.datamodules.test_pretext_datamodule import Numbers, OtherTag, Tag, epoch
from tests.helpers import discover


class Times(Task):
    """Multiply the item by ``factor``: an option a curriculum can change.

    Args:
        factor: What the item is multiplied by.
        **kwargs: Answer format options.
    """

    name = "times"
    modality = "image"

    def __init__(self, factor: int = 1, **kwargs):
        super().__init__(**kwargs)
        if factor < 1:
            raise ValueError("factor must be >= 1")
        self.factor = factor

    def make_example(self, item, rng):
        messages = self.user_message([], f"{item} times {self.factor}?")
        return Example(messages, str(item * self.factor), self.name, {"factor": self.factor, "item": item})

    def answer_text(self, example):
        return example.answer

    def score(self, example, answer):
        return {"accuracy": float(answer == example.answer)}


class Pair(Task):
    """Records the two items it was given."""

    name = "pair"
    modality = "image"
    partners = 1

    def make_example(self, item, rng):
        return Example([], str(item[0]), self.name, {"items": list(item), "draw": rng.random()})

    def answer_text(self, example):
        return example.answer

    def score(self, example, answer):
        return {"accuracy": float(answer == example.answer)}


def examples(dm, split="train"):
    return [e for b in epoch(dm, split) for e in b]


def test_task_draws_are_per_example_and_reproducible():
    make = lambda bs: PretextDataModule(
        Numbers(200), [Tag(), OtherTag(), Times()], weights=[2, 1, 1], batch_size=bs, val_size=0, seed=4
    )
    one, other = [[e.task for e in examples(make(bs))] for bs in (4, 8)]
    assert one == other  # the task of example i does not depend on how batches are cut
    assert len({tuple(one[k : k + 4]) for k in range(0, 200, 4)}) > 10  # batches mix tasks
    assert 0.4 < Counter(one)["tag"] / 200 < 0.6


def test_validation_gives_every_task_an_equal_share():
    dm = PretextDataModule(Numbers(100), [Tag(), OtherTag(), Times()], weights=[100, 1, 1], batch_size=4, val_size=30)
    assert Counter(e.task for e in examples(dm, "val")) == {"tag": 10, "other": 10, "times": 10}


def test_partner_items_are_other_items_of_the_same_split():
    dm = PretextDataModule(Numbers(60), Pair(), batch_size=5, val_size=10)
    train, val = examples(dm), examples(dm, "val")
    for split, allowed in ((train, range(50)), (val, range(50, 60))):
        for e in split:
            first, partner = e.meta["items"]
            assert first != partner and partner in allowed
    assert len({e.meta["items"][1] for e in train}) > 20
    again = PretextDataModule(Numbers(60), Pair(), batch_size=5, val_size=10)
    assert [e.meta["items"] for e in examples(again)] == [e.meta["items"] for e in train]


def test_an_unusable_partner_is_skipped_and_logged_by_its_own_index(caplog):
    dm = PretextDataModule(Numbers(30, bad={7}), Pair(), batch_size=5, val_size=0)
    with caplog.at_level(logging.WARNING, logger="datamodules"):
        batches = epoch(dm)
    assert all(7 not in e.meta["items"] for b in batches for e in b) and len(batches) == 6
    assert sum("number-7:" in r.getMessage() for r in caplog.records) == 1


def test_curriculum_stages_begin_at_their_positions():
    dm = PretextDataModule(Numbers(40), [Tag(), Times()], weights=[1, 1], batch_size=4, val_size=8)
    dm.set_curriculum([([1, 1], {"times": {"factor": 3}}), ([0.001, 1], {})])
    dm.set_stage_starts([8, 16])
    made = examples(dm)  # epoch 0: 32 examples
    stages = [e.meta.get(STAGE_KEY, 0) for e in made]
    assert stages == [0] * 8 + [1] * 8 + [2] * 16
    assert all(e.meta["factor"] == (1 if s == 0 else 3) for e, s in zip(made, stages, strict=True) if e.task == "times")
    assert sum(e.task == "times" for e in made[16:]) >= 15
    assert all(e.task != "times" or e.meta["factor"] == 1 for e in examples(dm, "val"))
    second = examples(dm)  # epoch 1 starts at position 32: all stage 2
    assert {e.meta.get(STAGE_KEY) for e in second} == {2}


def test_examples_are_a_function_of_seed_epoch_index_and_starts():
    def run(bs, starts):
        dm = PretextDataModule(Numbers(40), [Tag(), Times()], batch_size=bs, val_size=0, seed=2)
        dm.set_curriculum([(None, {"times": {"factor": 5}})])
        dm.set_stage_starts(starts)
        return [(e.task, e.answer, e.meta.get(STAGE_KEY)) for e in examples(dm)]

    assert run(4, [12]) == run(8, [12])
    assert run(4, [12])[:12] == run(4, [20])[:12] and run(4, [12]) != run(4, [20])


def test_verify_uses_the_stage_that_made_the_example():
    dm = PretextDataModule(Numbers(40), Times(answer_format="bare"), batch_size=4, val_size=0)
    dm.set_curriculum([(None, {"times": {"format_weight": 0.5}})])
    dm.set_stage_starts([4])
    first, second = epoch(dm)[:2]
    assert dm.verify(first[0], first[0].answer).total == 1.0
    assert dm.verify(second[0], second[0].answer).total == 1.5


def test_bad_curriculum_fails_before_training():
    dm = PretextDataModule(Numbers(40), [Tag(), Times()], batch_size=4, val_size=0)
    with pytest.raises(ValueError, match="unknown tasks"):
        dm.set_curriculum([(None, {"jigsaw": {"rows": 3}})])
    with pytest.raises(ValueError, match="no options"):
        dm.set_curriculum([(None, {"times": {"factr": 3}})])
    with pytest.raises(ValueError, match="factor"):
        dm.set_curriculum([(None, {"times": {"factor": 0}})])
    with pytest.raises(ValueError, match="weights"):
        dm.set_curriculum([([1], {})])
    dm.set_curriculum([(None, {"times": {"factor": 2}})])
    with pytest.raises(ValueError, match="starts"):
        dm.set_stage_starts([4, 8])


def test_with_options_copies_a_real_task():
    jigsaw = Jigsaw(rows=2, cols=2, composite=True, format_weight=0.5, think=True)
    harder = with_options(jigsaw, rows=3, cols=3)
    assert (harder.rows, harder.cols, harder.composite, harder.format_weight, harder.think) == (3, 3, True, 0.5, True)
    assert (jigsaw.rows, jigsaw.cols) == (2, 2)
    with pytest.raises(ValueError):
        with_options(jigsaw, rows=0)


@pytest.mark.parametrize("cls", discover(tasks, Task), ids=lambda c: c.__name__)
def test_every_task_keeps_its_options_so_a_curriculum_can_copy_it(cls):
    task = cls(format_weight=0.25)
    copy = with_options(task)
    assert type(copy) is cls and copy is not task and copy.format_weight == 0.25


def test_position_counts_global_batches_and_epochs():
    dm = PretextDataModule(Numbers(40), Tag(), batch_size=4, val_size=8, epoch_size=30)
    assert dm.position(0, 2) == 8 and dm.position(2, 1) == 64


class Sounds(Numbers):
    """A second modality: item ``i`` is ``-(i + 1)``."""

    modality = "audio"

    def __getitem__(self, index):
        return -super().__getitem__(index) - 1


class Echo(Tag):
    name = "echo"
    modality = "audio"


def test_each_task_reads_the_source_of_its_modality():
    dm = PretextDataModule([Numbers(50), Sounds(30)], [Tag(), Echo()], weights=[1, 1], batch_size=4, val_size=5)
    train = examples(dm)
    assert len(train) == (45 + 25) // 4 * 4  # one epoch is one example per training item of all sources
    for e in train:
        assert (int(e.answer) >= 0) == (e.task == "tag")
    assert {int(e.answer) for e in train if e.task == "tag"} <= set(range(45))
    assert {-int(e.answer) - 1 for e in train if e.task == "echo"} <= set(range(25))
    val = examples(dm, "val")
    assert [e.task for e in val] == ["tag", "echo"] * 2 + ["tag"]
    assert {int(e.answer) for e in val if e.task == "tag"} <= set(range(45, 50))
    assert {-int(e.answer) - 1 for e in val if e.task == "echo"} <= set(range(25, 30))


def test_sources_must_match_the_tasks_one_per_modality():
    with pytest.raises(ValueError, match="two image sources"):
        PretextDataModule([Numbers(20), Numbers(20)], Tag(), val_size=2)
    with pytest.raises(ValueError, match="no task takes"):
        PretextDataModule([Numbers(20), Sounds(20)], Tag(), val_size=2)
    with pytest.raises(ValueError, match="takes audio items"):
        PretextDataModule(Numbers(20), [Tag(), Echo()], val_size=2)
    dm = PretextDataModule(
        [Numbers(20), Sounds(20)], [Tag(), Echo()], val_source=Sounds(4, offset=100), val_size=4, batch_size=2
    )
    val = {e.task: int(e.answer) for e in examples(dm, "val")}
    assert val["echo"] <= -101 and 16 <= val["tag"] < 20  # audio from val_source, images from the tail
