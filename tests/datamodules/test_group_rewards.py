"""PretextDataModule with group-level rewards: Co-Reward pairs in training batches (held-out batches
keep the question alone), self-rewards while training and true rewards while validating, checked
item weights."""

from types import SimpleNamespace

import pytest

from datamodules import PretextDataModule, SyntheticScenes
from datamodules.streams import ITEM_KEY
from tasks import CoReward, MajorityVote, Rotation
from tasks.self_rewards import ROLE_KEY


def rotation(self_reward):
    return Rotation(labels="letters", answer_format="bare", self_reward=self_reward)


def data(task, **kwargs):
    return PretextDataModule(SyntheticScenes(size=12, image_size=32), task, batch_size=2, val_size=4, **kwargs)


def test_training_batches_hold_each_question_then_its_rewrite():
    dm = data(rotation(CoReward()), epoch_size=4)
    batches = list(dm.train_dataloader())
    assert len(batches) == 2 and all(len(b) == 4 for b in batches)  # 2 questions + 2 rewrites per rank
    for batch in batches:
        assert [e.meta[ROLE_KEY] for e in batch] == ["question", "rewrite"] * 2
        for asked, rewrite in zip(batch[::2], batch[1::2], strict=True):
            assert rewrite.uid == f"{asked.uid}/1" and rewrite.answer == asked.answer
            assert rewrite.meta[ITEM_KEY] == asked.meta[ITEM_KEY]
    held_out = [e for b in dm.val_dataloader() for e in b]
    assert len(held_out) == 4 and {e.meta[ROLE_KEY] for e in held_out} == {"question"}
    assert all(ITEM_KEY not in e.meta for e in held_out)


def test_self_rewards_apply_while_training_and_labels_while_validating():
    task = rotation(MajorityVote())
    dm = data(task)
    example = next(iter(dm.val_dataloader()))[0]
    wrong = next(letter for letter in "ABCD" if letter != task.answer_text(example))
    groups = [[wrong, wrong, task.answer_text(example)]]
    dm.trainer = SimpleNamespace(training=True)
    [trained] = dm.verify_group([example], groups)
    assert [r.total for r in trained] == [1.0, 1.0, 0.0]  # the wrong majority is paid
    assert [r.parts["accuracy"] for r in trained] == [0.0, 0.0, 1.0]  # and logged as wrong
    dm.trainer = SimpleNamespace(training=False)
    [validated] = dm.verify_group([example], groups)
    assert [r.total for r in validated] == [0.0, 0.0, 1.0] and "agreement" not in validated[0].parts


def test_item_weights_are_checked():
    dm = data(rotation(None))
    assert dm.training_items == {"image": 8}
    for bad, message in (([1.0] * 7, "one per training item"), ([0.0] * 8, "not all 0"), ([-1.0] + [1.0] * 7, ">= 0")):
        with pytest.raises(ValueError, match=message):
            dm.set_item_weights(0, {"image": bad})
    with pytest.raises(ValueError, match="audio"):
        dm.set_item_weights(0, {"audio": [1.0]})
