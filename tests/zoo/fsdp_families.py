"""One FSDP2 GRPO step of every PolicyModule family x tiny checkpoint, on 2 CPU processes (gloo).

Run by `tests/zoo/test_fsdp.py`: ``torchrun --standalone --nproc_per_node 2 -m
tests.zoo.fsdp_families OUT_DIR`` (both ranks import at once; Lightning's own launcher would start
the second only at the first fit). Each rank writes ``OUT_DIR/rank<r>.json`` with, per case, the
loss and, for every parameter of the policy and of its reference model, how it is sharded and
whether this rank's shard changed, and what `zoo.rollout.engine.full_weights` gives a rollout
engine.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import torch
from lightning.pytorch import Callback, Trainer

import zoo
from callbacks import GRPOMetrics
from datamodules import PretextDataModule, SyntheticAudio, SyntheticPointClouds, SyntheticScenes
from tasks import AudioSpeed, PointCloudRotation, Rotation
from tests.helpers import LoudOrQuiet, discover
from zoo import PolicyModule
from zoo.grpo import GRPOFSDPStrategy
from zoo.rollout.engine import full_weights

CASES = [(cls, ckpt) for cls in discover(zoo, PolicyModule) for ckpt in cls.tiny_checkpoints]


def case_id(cls, ckpt: str) -> str:
    return f"{cls.__name__}-{ckpt}"


def data_for(cls) -> PretextDataModule:
    """A task through the family's media encoders: audio and an image together where it takes
    both."""
    kinds = cls.content_kinds
    if {"audio", "image"} <= kinds:
        source, task = SyntheticAudio(size=4, seconds=1.0), LoudOrQuiet(answer_format="bare")
    elif "audio" in kinds:
        source, task = SyntheticAudio(size=4, seconds=1.0), AudioSpeed(speeds=[0.5, 2.0], answer_format="bare")
    elif "point_cloud" in kinds:
        source, task = SyntheticPointClouds(size=4, num_points=64), PointCloudRotation(answer_format="bare")
    else:
        source, task = SyntheticScenes(size=4), Rotation(answer_format="bare")
    return PretextDataModule(source, task, batch_size=1, val_size=0, epoch_size=2)


class Snapshot(Callback):
    """This rank's parameter shards when training starts, to tell which ones the step changed."""

    def on_train_start(self, trainer, pl_module):
        self.before = {n: _local(p).clone() for n, p in pl_module.model.named_parameters()}


def _local(p: torch.Tensor) -> torch.Tensor:
    return p.to_local().detach() if hasattr(p, "to_local") else p.detach()


def _group_of(policy) -> dict[str, str]:
    """Parameter name -> the `module_groups` entry holding it."""
    ids = {id(p): g for g, modules in policy.module_groups().items() for m in modules for p in m.parameters()}
    return {n: ids.get(id(p), "") for n, p in policy.model.named_parameters()}


def _describe(p: torch.Tensor) -> dict:
    dtensor = hasattr(p, "to_local")
    return {
        "dtensor": dtensor,
        "placements": [str(x) for x in p.placements] if dtensor else [],
        "mesh_size": p.device_mesh.size() if dtensor else 1,
        "shape": list(p.shape),
        "local_shape": list(_local(p).shape),
    }


def run(cls, ckpt: str) -> dict:
    torch.manual_seed(0)
    policy = cls(ckpt, optimizer=partial(torch.optim.AdamW, lr=1e-2, weight_decay=0.0))
    # the entropy bonus gives every step a gradient even when all G rewards tie; beta loads the
    # reference
    strategy = GRPOFSDPStrategy(num_generations=2, max_new_tokens=2, entropy_coef=0.1, beta=0.04, max_grad_norm=None)
    snapshot = Snapshot()
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        max_steps=1,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        callbacks=[GRPOMetrics(summary=False), snapshot],
    )
    trainer.fit(policy, data_for(cls))
    groups = _group_of(policy)
    params = {
        n: _describe(p)
        | {
            "group": groups[n],
            "changed": not torch.equal(_local(p), snapshot.before[n]),
            "local_sum": float(_local(p).double().sum()),
        }
        for n, p in policy.model.named_parameters()
    }
    full = {n: {"shape": list(t.shape), "sum": float(t.double().sum())} for n, t in full_weights(policy)}
    reference = policy.__dict__["_reference"]
    return {
        "loss": float(trainer.callback_metrics["train/grpo/loss"]),
        "steps": trainer.global_step,
        "params": params,
        "reference": {n: _describe(p) for n, p in reference.named_parameters()},
        "full_weights": full,
    }


def main(out: Path) -> None:
    report = {case_id(cls, ckpt): run(cls, ckpt) for cls, ckpt in CASES}
    rank = torch.distributed.get_rank()
    (out / f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
