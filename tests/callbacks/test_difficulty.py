"""Per-item difficulty: pass rates from canned rewards, the weight formulas by hand, the drawn
distribution, the same decisions on 1 and 2 ranks (gloo, spawned), and the same draws after a
checkpoint round trip."""

import copy
import json
import socket
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback

from callbacks import DifficultySampler
from datamodules import PretextDataModule
from datamodules.difficulty import PassRates, weights
from datamodules.streams import ITEM_KEY
from tasks import Reward
from tests.datamodules.test_pretext_datamodule import Numbers, Tag

ITEMS = 12


def setup(sampler, rank=0, world=1, batch_size=4, epoch_size=24, epoch=0):
    dm = PretextDataModule(Numbers(ITEMS + 4), Tag(), batch_size=batch_size, val_size=4, epoch_size=epoch_size)
    trainer = SimpleNamespace(
        datamodule=dm, current_epoch=epoch, global_rank=rank, world_size=world, global_step=0, max_steps=100
    )
    dm.trainer = trainer
    sampler.setup(trainer, None, "fit")
    sampler.on_train_start(trainer, None)
    return trainer, dm


def canned(batch, solved):
    """Outputs of a GRPO step with 2 completions per example: ``solved(item)`` of them score
    accuracy 1."""
    rewards = []
    for example in batch:
        k = solved(example.meta[ITEM_KEY])
        rewards += [Reward(float(g < k), {"accuracy": float(g < k)}) for g in range(2)]
    return {"rollout": SimpleNamespace(examples=batch, num_generations=2), "rewards": rewards}


def train_epoch(sampler, trainer, dm, solved):
    """One epoch of canned steps; returns the items of its examples in order."""
    items = []
    for b, batch in enumerate(dm.train_dataloader()):
        items += [e.meta[ITEM_KEY] for e in batch]
        sampler.on_train_batch_end(trainer, None, canned(batch, solved), batch, b)
        trainer.global_step += 1
    sampler.on_train_epoch_end(trainer, None)
    trainer.current_epoch += 1
    return items


def test_pass_rates_are_moving_averages_of_the_canned_rewards():
    rates = PassRates(smoothing=0.5)
    rates.update([("image", 3, 0.5), ("image", 3, 1.0), ("image", 7, 0.0), ("video", 3, 1.0)])
    assert rates.rates == {"image": {3: 0.75, 7: 0.0}, "video": {3: 1.0}}  # 0.5 + 0.5 x (1 - 0.5)
    assert rates.array("image", 8, prior=0.5).tolist() == [0.5, 0.5, 0.5, 0.75, 0.5, 0.5, 0.5, 0.0]
    sampler = DifficultySampler()
    trainer, dm = setup(sampler)
    batch = next(iter(dm.train_dataloader()))
    sampler.on_train_batch_end(trainer, None, canned(batch, lambda item: item % 3), batch, 0)
    expected = {e.meta[ITEM_KEY]: min(e.meta[ITEM_KEY] % 3, 2) / 2 for e in batch}
    assert sampler.rates.rates == {"image": expected}


def test_weight_formulas_by_hand():
    p = np.array([0.0, 0.25, 0.5, 1.0])
    assert weights(p, "dgrpo").tolist() == [1.0, 0.875, 0.75, 0.5]  # (1 + (1 - p)) / 2
    assert weights(p, "variance").tolist() == [0.0, 0.75, 1.0, 0.0]  # 4 p (1 - p)
    assert weights(p, "easy_to_hard", 0.0).tolist() == p.tolist()
    assert weights(p, "easy_to_hard", 1.0).tolist() == (1 - p).tolist()
    np.testing.assert_allclose(weights(p, "easy_to_hard", 0.5), np.sqrt(p * (1 - p)))
    with pytest.raises(ValueError, match="mode"):
        weights(p, "hardest")


def test_the_next_epoch_draws_items_in_proportion_to_their_weights():
    sampler = DifficultySampler(mode="variance", min_weight=0.05)
    trainer, dm = setup(sampler, epoch_size=ITEMS)  # epoch 0: a permutation, every item once
    first = train_epoch(sampler, trainer, dm, lambda item: 1 if item < 4 else 2 * (item % 2))
    assert sorted(first) == list(range(ITEMS))
    # items 0-3 passed half the time (weight 1), the rest always or never (weight 0.05): P(0-3) = 4
    # / 4.4
    weights_now = sampler.current[1]["image"]
    assert sampler.current[0] == 1 and weights_now == [1.0] * 4 + [0.05] * (ITEMS - 4)
    dm.epoch_size = 4000
    dm._streams.clear()  # a longer epoch, to measure the frequencies
    drawn = Counter(e.meta[ITEM_KEY] for batch in dm.train_dataloader() for e in batch)
    share = sum(drawn[i] for i in range(4)) / sum(drawn.values())
    assert share == pytest.approx(4 / 4.4, abs=0.02) and set(drawn) == set(range(ITEMS))
    assert drawn[0] / 4000 == pytest.approx(1 / 4.4, abs=0.03)


def test_a_resumed_run_draws_the_same_items(tmp_path):
    solved = lambda item: item % 3  # noqa: E731
    sampler = DifficultySampler(mode="dgrpo")
    trainer, dm = setup(sampler)
    train_epoch(sampler, trainer, dm, solved)
    torch.save(sampler.state_dict(), tmp_path / "state.pt")
    expected = [[e.meta[ITEM_KEY] for e in b] for b in dm.train_dataloader()]
    resumed = DifficultySampler(mode="dgrpo")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))  # how checkpoints are read
    _, fresh = setup(resumed, epoch=1)
    assert [[e.meta[ITEM_KEY] for e in b] for b in fresh.train_dataloader()] == expected
    assert resumed.rates.rates == sampler.rates.rates
    _, forgetful = setup(DifficultySampler(mode="dgrpo"), epoch=1)  # without the state: a plain permutation
    assert [[e.meta[ITEM_KEY] for e in b] for b in forgetful.train_dataloader()] != expected


def tamper(state: dict, what: str) -> dict:
    """A copy of a sampler's saved state altered the way ``what`` says."""
    state = copy.deepcopy(state)
    rates, drawn = state["rates"]["image"], state["current"][1]
    if what in ("a NaN rate", "an infinite rate", "a rate that is text"):
        rates[3] = {"a NaN rate": float("nan"), "an infinite rate": float("inf")}.get(what, "0.5")
    elif what == "a negative item":
        rates[-1] = 0.0  # would set the rate of the last item
    elif what == "rates not a mapping":
        state["rates"] = {"image": [0.5, 0.5]}
    elif what == "a negative epoch":
        state["current"] = (-1, drawn)
    else:
        drawn["image"] = {
            "a NaN weight": [float("nan")] * ITEMS,
            "weights not a list": 0.5,
            "negative weights": [-1.0] * ITEMS,
            "all weights 0": [0.0] * ITEMS,
        }[what]
    return state


TAMPERED = [
    "a NaN rate",
    "an infinite rate",
    "a rate that is text",
    "a negative item",
    "rates not a mapping",
    "a negative epoch",
    "a NaN weight",
    "negative weights",
    "all weights 0",
    "weights not a list",
]


@pytest.mark.parametrize("what", TAMPERED)
def test_tampered_state_is_refused_when_loaded_in_one_line(tmp_path, what):
    """Before: each loaded; a NaN rate failed only at the end of the next epoch, a negative item
    silently set the last item's rate."""
    sampler = DifficultySampler(mode="variance")
    trainer, dm = setup(sampler)
    train_epoch(sampler, trainer, dm, lambda item: item % 3)
    torch.save(tamper(sampler.state_dict(), what), tmp_path / "state.pt")
    resumed = DifficultySampler(mode="variance")
    with pytest.raises(ValueError, match="DifficultySampler.* state in the checkpoint") as err:
        resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert "\n" not in str(err.value) and resumed.rates.rates == {} and resumed.current is None
    resumed.load_state_dict(sampler.state_dict())  # the untouched state loads
    assert resumed.rates.rates == sampler.rates.rates and resumed.current == sampler.current


def test_a_data_module_without_item_weights_is_refused():
    trainer = SimpleNamespace(datamodule=object())
    with pytest.raises(RuntimeError, match="item weights"):
        DifficultySampler().setup(trainer, None, "fit")


def _run(rank: int, world: int, port: int, out: str) -> None:
    """Two epochs on rank ``rank`` of ``world`` (gloo when ``world > 1``); writes the rates, the
    weights and this rank's items of the second epoch to ``out``."""
    if world > 1:
        torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    sampler = DifficultySampler(mode="variance")
    trainer, dm = setup(sampler, rank=rank, world=world, batch_size=4 // world)
    train_epoch(sampler, trainer, dm, lambda item: item % 3)
    second = [[e.meta[ITEM_KEY] for e in b] for b in dm.train_dataloader()]
    result = {
        "rates": {str(k): v for k, v in sampler.rates.rates["image"].items()},
        "weights": sampler.current[1],
        "items": second,
    }
    with open(f"{out}.{rank}.json", "w") as f:
        json.dump(result, f)
    if world > 1:
        torch.distributed.destroy_process_group()


def test_one_and_two_ranks_decide_alike(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "run")
    torch.multiprocessing.spawn(_run, args=(2, port, out + "2"), nprocs=2, join=True)  # spawn: no fork deadlock
    _run(0, 1, port, out + "1")
    one, *two = (json.loads((tmp_path / name).read_text()) for name in ("run1.0.json", "run2.0.json", "run2.1.json"))
    assert two[0]["rates"] == two[1]["rates"] == one["rates"] and len(one["rates"]) > 6
    assert two[0]["weights"] == two[1]["weights"] == one["weights"]
    # global batch b: rank 0's two items, then rank 1's, are the one-process batch b
    assert [a + b for a, b in zip(two[0]["items"], two[1]["items"], strict=True)] == one["items"]


class Probe(Callback):
    """Records the items of each step and, per epoch, the weights the sampler had decided for that
    epoch."""

    def __init__(self, sampler):
        self.sampler, self.steps, self.epochs, self.decided = sampler, [], {}, {}

    def on_train_epoch_start(self, trainer, pl_module):
        self.decided[trainer.current_epoch] = self.sampler.current

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.steps.append([e.meta[ITEM_KEY] for e in batch])
        self.epochs.setdefault(trainer.current_epoch, []).extend(self.steps[-1])


def tiny_data(workers: int = 0) -> PretextDataModule:
    from datamodules import SyntheticScenes
    from tasks import Rotation

    return PretextDataModule(
        SyntheticScenes(size=12, image_size=28),
        Rotation(labels="letters", answer_format="bare"),
        batch_size=2,
        val_size=2,
        epoch_size=4,
        num_workers=workers,
    )  # 2 steps an epoch


def fit_sampled(ckpt_path=None, save_dir=None, workers: int = 0) -> Probe:
    """Six steps of a real tiny GRPO run with a ``dgrpo`` sampler, checkpointing every 3 steps into
    ``save_dir``."""
    from functools import partial

    from lightning.pytorch import Trainer
    from lightning.pytorch.callbacks import ModelCheckpoint

    from zoo import GRPOStrategy, QwenVLPolicy

    torch.manual_seed(0)
    probe = Probe(DifficultySampler(mode="dgrpo", smoothing=0.7))
    saving = [ModelCheckpoint(save_dir, every_n_train_steps=3, save_top_k=-1)] if save_dir else []
    trainer = Trainer(
        max_steps=6,
        strategy=GRPOStrategy(num_generations=2, max_new_tokens=1),
        logger=False,
        enable_checkpointing=bool(save_dir),
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[probe.sampler, probe, *saving],
        limit_val_batches=0,
    )
    trainer.fit(
        QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3)),
        tiny_data(workers),
        ckpt_path=ckpt_path,
    )
    return probe


def test_a_real_run_draws_each_epoch_by_the_weights_decided_before_it():
    """With a data worker, which builds its epoch in another process (0 workers: the resume test
    below)."""
    probe = fit_sampled(workers=1)
    assert probe.decided[0] is None and [probe.decided[e][0] for e in (1, 2)] == [1, 2]
    for epoch in (1, 2):
        replay = tiny_data()
        replay.set_item_weights(*probe.decided[epoch])
        replay.trainer = SimpleNamespace(current_epoch=epoch, global_rank=0, world_size=1)
        assert [e.meta[ITEM_KEY] for b in replay.train_dataloader() for e in b] == probe.epochs[epoch]


def test_a_run_resumed_from_its_checkpoint_draws_and_rates_as_one_never_stopped(tmp_path):
    """Killed after step 3 (mid-epoch 1, the first weighted one) and resumed from the checkpoint
    Lightning wrote. A checkpoint written at the last batch of an epoch resumes one epoch number
    later with or without the sampler (Lightning's restart on the last batch), so only a mid-epoch
    stop is compared."""
    straight = fit_sampled(save_dir=tmp_path)
    (ckpt,) = tmp_path.glob("*step=3.ckpt")
    resumed = fit_sampled(ckpt_path=ckpt)
    assert resumed.steps == straight.steps[3:] and straight.sampler.current[0] == 3
    assert resumed.sampler.rates.rates == straight.sampler.rates.rates
    assert resumed.sampler.current == straight.sampler.current
