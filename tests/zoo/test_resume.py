"""Resuming equals never stopping: same rollouts, rewards and parameters (data position, sampling
seeds, optimizer state all restored), with dynamic sampling's refill rounds too."""

from functools import partial

import pytest
import torch
from lightning.pytorch import Callback, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from callbacks import Checkpoints
from datamodules import PretextDataModule, SyntheticScenes
from tasks import Rotation
from tests.zoo.canned_engine import CannedEngine
from zoo import GRPOStrategy, QwenVLPolicy


class Record(Callback):
    def __init__(self):
        self.steps = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.steps.append(
            (
                trainer.global_step,
                [ex.uid for ex in batch],
                outputs["rollout"].completions,
                outputs["metrics"]["train/reward"],
                _unequal(outputs["rewards"], len(batch)),
                outputs["metrics"].get("train/dynamic/groups_kept"),
            )
        )


def _unequal(rewards: list, prompts: int) -> int:
    """Groups of the batch's own rollout with unequal rewards."""
    totals = torch.tensor([r.total for r in rewards]).view(prompts, -1)  # [B, G]
    return int((totals != totals[:, :1]).any(dim=1).sum())


def recording(refill, log: list):
    """``refill`` that also appends ``(key, round, uids)`` of every refill round to ``log``."""

    def wrapped(key: int, round: int):
        examples = refill(key, round)
        log.append((key, round, [ex.uid for ex in examples]))
        return examples

    return wrapped


def run(
    max_steps: int,
    ckpt_path=None,
    save_every=None,
    save_dir=None,
    saving=None,
    val_size=0,
    refills=None,
    engine=None,
    grpo: dict | None = None,
    **trainer,
):
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3), engine=engine)
    data = PretextDataModule(
        SyntheticScenes(size=100),
        Rotation(labels="letters", answer_format="bare"),
        batch_size=4,
        val_size=val_size,
        epoch_size=16,
    )  # 4 batches an epoch
    if refills is not None:
        data.refill = recording(data.refill, refills)
    record = Record()
    if saving is None:
        saving = [ModelCheckpoint(save_dir, every_n_train_steps=save_every, save_top_k=-1)] if save_every else []
    trainer.setdefault("limit_val_batches", 0)
    strategy = GRPOStrategy(**dict(num_generations=4, max_new_tokens=3, entropy_coef=0.05) | (grpo or {}))
    trainer = Trainer(
        max_steps=max_steps,
        strategy=strategy,
        logger=False,
        enable_checkpointing=bool(saving),
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[record, *saving],
        **trainer,
    )
    trainer.fit(policy, data, ckpt_path=ckpt_path)
    return record.steps, {n: p.detach().clone() for n, p in policy.named_parameters()}


@pytest.mark.parametrize("stop", [3, 4], ids=["mid-epoch", "epoch-end"])
def test_resume_equals_continuous(tmp_path, stop):
    """A run interrupted after step ``stop`` (checkpoint written during training: mid-epoch, or at
    the last batch of an epoch, which Lightning restores as the end of that epoch) and resumed."""
    straight, final = run(6, save_every=stop, save_dir=tmp_path)
    (ckpt,) = tmp_path.glob(f"*step={stop}.ckpt")
    second, resumed = run(6, ckpt_path=ckpt)
    assert second == straight[stop:]
    assert len({uid for _, uids, *_ in straight for uid in uids}) == 24  # no example seen twice
    for name, value in final.items():
        torch.testing.assert_close(resumed[name], value, rtol=0, atol=1e-6, msg=name)


def test_dynamic_sampling_resumes_with_the_refills_of_the_uninterrupted_run(tmp_path):
    """``refill_rounds``: the refill prompts are keyed by the restored step, so the resumed run
    draws the same refill prompts and makes the same updates. The canned engine answers half the
    prompts with one letter (equal rewards) and the others with each letter once, so batches need
    refills and train on them."""
    straight_refills, resumed_refills = [], []
    dynamic = dict(refill_rounds=3, max_new_tokens=2)  # a letter and its EOS
    straight, final = run(
        4, save_every=2, save_dir=tmp_path, refills=straight_refills, engine=CannedEngine(), grpo=dynamic
    )
    (ckpt,) = tmp_path.glob("*step=2.ckpt")
    second, resumed = run(4, ckpt_path=ckpt, refills=resumed_refills, engine=CannedEngine(), grpo=dynamic)
    assert second == straight[2:]
    assert resumed_refills == [r for r in straight_refills if r[0] >= 2] and len(resumed_refills) >= 2
    assert any(kept > own for *_, own, kept in second)  # refill groups were trained on after the resume
    for name, value in final.items():
        torch.testing.assert_close(resumed[name], value, rtol=0, atol=1e-6, msg=name)


def test_a_run_ended_by_max_steps_between_validations_resumes_exactly_from_its_final_checkpoint(tmp_path):
    """2 of 4 steps, mid-epoch, no validation due: the final checkpoint (`callbacks.Checkpoints`) is
    saved before Lightning counts the epoch as completed, so the resumed run continues the epoch
    instead of starting the next."""
    validating = {
        "val_size": 4,
        "val_check_interval": 100,
        "check_val_every_n_epoch": None,
        "limit_val_batches": None,
        "num_sanity_val_steps": 0,
    }
    straight, final = run(4, **validating)
    first, _ = run(2, saving=[Checkpoints(tmp_path)], **validating)
    (ckpt,) = tmp_path.glob("*.ckpt")
    assert ckpt.name == "epoch=0-step=2.ckpt" and first == straight[:2]
    second, resumed = run(4, ckpt_path=ckpt, **validating)
    assert second == straight[2:]
    for name, value in final.items():
        torch.testing.assert_close(resumed[name], value, rtol=0, atol=1e-6, msg=name)
