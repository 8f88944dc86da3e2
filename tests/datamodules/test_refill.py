"""PretextDataModule.refill (dynamic sampling): refill prompts are a pure function of (seed, batch
key, round, position), split over ranks like a training batch, and leave the training batches
alone."""

from types import SimpleNamespace

from datamodules.streams import STAGE_KEY
from tests.datamodules.test_mixing import Times
from tests.datamodules.test_pretext_datamodule import Numbers, OtherTag, Tag, epoch, key


def attach(dm, rank=0, world=1, processed=0):
    """What the data module reads from a real trainer (epoch 0, ``processed`` batches of it
    done)."""
    progress = SimpleNamespace(current=SimpleNamespace(processed=processed))
    dm.trainer = SimpleNamespace(
        current_epoch=0,
        global_rank=rank,
        world_size=world,
        fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(batch_progress=progress)),
    )
    return dm


def module(batch_size=4, **kwargs):
    from datamodules import PretextDataModule

    return PretextDataModule(Numbers(50), [Tag(), OtherTag()], batch_size=batch_size, val_size=0, seed=3, **kwargs)


def fingerprint(examples):
    return [(e.uid, *key(e)) for e in examples]


def test_two_ranks_split_the_global_round_of_one_process():
    one = fingerprint(attach(module(batch_size=6)).refill(5, 2))
    two = [fingerprint(attach(module(batch_size=3), rank=r, world=2).refill(5, 2)) for r in (0, 1)]
    assert two[0] + two[1] == one and len(one) == 6


def test_refills_are_a_pure_function_of_key_and_round_and_leave_training_alone():
    dm = attach(module())
    before = [fingerprint(b) for b in epoch(dm)]
    first = fingerprint(dm.refill(7, 1))
    dm.refill(8, 3)  # other draws in between change nothing
    assert fingerprint(dm.refill(7, 1)) == first == fingerprint(attach(module()).refill(7, 1))  # a fresh run
    assert [fingerprint(b) for b in epoch(dm)] == before
    others = [fingerprint(dm.refill(k, r)) for k, r in ((7, 2), (8, 1))]
    assert all(o != first for o in others)
    uids = {e[0] for e in first + others[0] + others[1]}
    assert len(uids) == 12 and not uids & {e[0] for b in before for e in b}  # never a training example's uid
    assert len({e[2] for e in first + others[0] + others[1]}) > 6  # items from the whole training split
    assert {e[2] for e in first} != {e[2] for e in others[1]}  # another batch's round 1 shows other items


def test_refills_follow_the_curriculum_stage_of_the_batch_they_refill():
    dm = attach(module(), processed=2)  # training position 2 * 4
    dm.set_curriculum([([1.0, 1e-9], {})])  # stage 1: only tag
    dm.set_stage_starts([100])
    assert {e.task for e in dm.refill(0, 1) + dm.refill(1, 1)} == {"tag", "other"}
    dm.set_stage_starts([8])
    refilled = dm.refill(0, 1) + dm.refill(1, 1)
    assert {e.task for e in refilled} == {"tag"} and all(e.meta[STAGE_KEY] == 1 for e in refilled)


def test_an_unusable_item_is_skipped_and_counted():
    from datamodules import PretextDataModule

    dm = attach(PretextDataModule(Numbers(30, bad=set(range(0, 30, 2))), Times(), batch_size=4, val_size=0))
    examples = [e for k in range(5) for e in dm.refill(k, 1)]
    assert len(examples) == 20 and all(e.meta["item"] % 2 for e in examples)
    assert dm.skipped > 0 and dm.skip_counts[("Numbers", "unreadable")] == dm.skipped
