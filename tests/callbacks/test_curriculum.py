"""Curriculum: step and threshold switches, exact state round-trip, the same switch on every
rank."""

from types import SimpleNamespace

import pytest

from callbacks import Curriculum, Stage
from datamodules import PretextDataModule
from datamodules.streams import STAGE_KEY
from tests.datamodules.test_mixing import Times
from tests.datamodules.test_pretext_datamodule import Numbers, Tag

METRIC = "train/reward/times/accuracy"


def setup(curriculum, rank=0, world=1, batch_size=4, epoch=0):
    dm = PretextDataModule(Numbers(72), [Tag(), Times()], batch_size=batch_size, val_size=8)
    trainer = SimpleNamespace(datamodule=dm, current_epoch=epoch, global_rank=rank, world_size=world, global_step=0)
    dm.trainer = trainer
    trainer.num_training_batches = len(dm.train_dataloader())
    curriculum.setup(trainer, None, "fit")
    curriculum.on_train_start(trainer, None)
    return trainer, dm


def made(dm):
    batches = list(dm.train_dataloader())
    return [[(e.task, e.answer, e.meta.get(STAGE_KEY, 0)) for e in batch] for batch in batches]


def feed(curriculum, trainer, values, start=0):
    """Training batches ``start, ...`` of an epoch whose all-rank mean metric is ``values[b]``
    (None: the task was absent from the batch)."""
    for b, value in enumerate(values, start):
        metrics = {} if value is None else {METRIC: value}
        curriculum.on_train_batch_end(trainer, None, {"metrics": metrics}, [], b)


def test_step_stages_begin_at_their_batch():
    curriculum = Curriculum([Stage(tasks={"times": {"factor": 3}}, step=2), Stage(weights=[1e-9, 1], step=12)])
    trainer, dm = setup(curriculum)  # 64 training items, batches of 4: 16 batches per epoch
    batches = made(dm)
    assert [b[0][2] for b in batches] == [0, 0] + [1] * 10 + [2] * 4
    assert all(answer.isdigit() for b in batches for _, answer, _ in b)
    times = [e for b in batches[2:12] for e in b if e[0] == "times"]
    assert times and all(int(answer) % 3 == 0 for _, answer, _ in times)
    assert sum(task == "times" for b in batches[12:] for task, _, _ in b) == 16
    trainer.current_epoch = 1
    assert {b[0][2] for b in made(dm)} == {2}


def test_a_threshold_switch_begins_at_the_next_epoch():
    curriculum = Curriculum([Stage(tasks={"times": {"factor": 7}}, metrics={METRIC: 0.8})], window=3)
    trainer, dm = setup(curriculum)
    feed(curriculum, trainer, [0.9, 0.9, 0.5, None, 0.9, 0.9])  # means of the last 3: 0.77 at best
    assert curriculum.starts == []
    feed(curriculum, trainer, [0.9], start=6)  # 0.9, 0.9, 0.9
    assert curriculum.starts == [64]  # the first example of epoch 1
    assert {b[0][2] for b in made(dm)} == {0}  # this epoch is unchanged
    trainer.current_epoch = 1
    assert {b[0][2] for b in made(dm)} == {1}


def test_thresholds_below_the_bar_never_switch():
    curriculum = Curriculum([Stage(metrics={METRIC: 0.8})], window=2)
    trainer, dm = setup(curriculum)
    feed(curriculum, trainer, [0.7, 0.85, 0.6, 0.99, None, 0.5])  # pair means 0.795 at best
    assert curriculum.starts == []


def test_state_round_trip_resumes_exactly():
    stages = lambda: [Stage(metrics={METRIC: 0.5}), Stage(tasks={"times": {"factor": 2}}, step=20)]
    straight = Curriculum(stages(), window=4)
    trainer, dm = setup(straight)
    feed(straight, trainer, [0.1, 0.6, 0.6, 0.6, 0.6])  # decided on batch 4 of epoch 0
    # a run stopped after batch 2 and resumed from its checkpoint sees the same batches 3 and 4
    stopped = Curriculum(stages(), window=4)
    trainer2, _ = setup(stopped)
    feed(stopped, trainer2, [0.1, 0.6, 0.6])
    state = stopped.state_dict()
    resumed = Curriculum(stages(), window=4)
    resumed.load_state_dict(state)
    trainer3, dm3 = setup(resumed)
    for b, value in [(3, 0.6), (4, 0.6)]:
        resumed.on_train_batch_end(trainer3, None, {"metrics": {METRIC: value}}, [], b)
    assert resumed.starts == straight.starts == [64, 80]  # stage 2 follows at step 20 = epoch 1, batch 4
    for epoch in (0, 1):
        trainer.current_epoch = trainer3.current_epoch = epoch
        assert made(dm) == made(dm3)
    reloaded = Curriculum(stages(), window=4)
    reloaded.load_state_dict(straight.state_dict())
    assert reloaded.state_dict() == straight.state_dict()


def test_every_rank_switches_at_the_same_global_batch():
    stages = lambda: [Stage(tasks={"times": {"factor": 5}}, step=3)]
    single = made(setup(Curriculum(stages()), batch_size=8)[1])
    ranks = [made(setup(Curriculum(stages()), rank=r, world=2, batch_size=4)[1]) for r in (0, 1)]
    assert [a + b for a, b in zip(*ranks, strict=True)] == single
    assert [b[0][2] for b in single] == [0, 0, 0, 1, 1, 1, 1, 1]


@pytest.mark.parametrize("stage", [Stage(), Stage(step=3, metrics={METRIC: 1.0}), Stage(step=-1)])
def test_each_stage_has_one_trigger(stage):
    with pytest.raises(ValueError):
        Curriculum([stage])


def test_a_bad_stage_fails_at_setup():
    with pytest.raises(ValueError, match="unknown tasks"):
        setup(Curriculum([Stage(tasks={"jigsaw": {"rows": 3}}, step=1)]))
