"""``zoo build-base``: builds ``tiny:qwen2_5_vl_perception``, a small pretrained base made offline
with zoo itself: the random-init tiny Qwen2.5-VL after supervised fine-tuning
(`zoo.sft.SFTStrategy`) on zoo's labelled synthetic perception corpus
(`datamodules.SyntheticQuestions`, train split: spatial relations, counts, relative depth, temporal
order, one lettered answer each, the answer format of the pretext tasks). Cached beside the tiny
models under a key that hashes the recipe and every file that decides the weights
(`zoo.tiny.TRAINED`), and rebuilt the same on every machine (fixed seeds, one thread); ``tiny:``
only loads it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from zoo import tiny
from zoo.cache import build_once
from zoo.tools.repro.downstream import corpus, downstream_scores, question_task

FAMILY = "qwen2_5_vl_perception"
RECIPE = tiny.TRAINED[FAMILY]
STEPS = RECIPE.steps
BATCH = RECIPE.batch
LR = RECIPE.lr


def sft(policy, steps: int, seed: int = 0, lr: float = LR, batch: int = BATCH, callbacks: list | None = None):
    """``steps`` SFT steps of ``policy`` (AdamW ``lr``, betas 0.9 / 0.99, no weight decay, clip 1.0)
    on the training corpus drawn with ``seed``; used to build the base and as the continued-SFT
    control of `zoo repro`."""
    from lightning.pytorch import Trainer, seed_everything

    from datamodules import PretextDataModule
    from zoo.sft import SFTStrategy

    seed_everything(seed, verbose=False)
    policy.optimizer_factory = lambda params: torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    data = PretextDataModule(corpus(seed=seed), question_task(), batch_size=batch, val_size=0, seed=seed)
    trainer = Trainer(
        max_steps=steps,
        strategy=SFTStrategy(max_new_tokens=1),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        callbacks=callbacks or [],
    )
    trainer.fit(policy, data)
    return trainer


def build(out_dir: str | Path, steps: int | None = None, seed: int = 0) -> Path:
    """SFT the random-init ``tiny:qwen2_5_vl`` for ``steps`` steps (None: `STEPS`) and save it, with
    its held-out scores, to ``out_dir``."""
    from zoo import QwenVLPolicy

    steps = STEPS if steps is None else steps
    torch.set_num_threads(1)  # the same float sums on every machine
    start = time.perf_counter()
    cpu = time.process_time()
    policy = QwenVLPolicy(tiny.resolve("tiny:qwen2_5_vl"))
    sft(policy, steps, seed, lr=LR, batch=BATCH)  # the module's values now, as `key` reads them
    out = Path(out_dir)
    policy.save_pretrained(str(out))
    built = {
        "steps": steps,
        "batch": BATCH,
        "lr": LR,
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
        "parameters": sum(p.numel() for p in policy.model.parameters()),
    }
    built["scores"] = downstream_scores(policy)
    (out / "perception_scores.json").write_text(json.dumps(built, indent=2))
    return out


def key() -> str:
    """The base's cache key (`zoo.tiny.trained_key`) for the recipe's values now."""
    return tiny.trained_key(FAMILY, STEPS, BATCH, LR)


def resolve() -> str:
    """The cached base's directory, built first when it is missing (a few CPU minutes)."""
    target = tiny.trained_dir(FAMILY, STEPS, BATCH, LR)
    return str(build_once(target, lambda folder: build(folder, STEPS)))


def build_base(*, out: str | None = None, steps: int | None = None, seed: int = 0) -> None:
    """Build the trained tiny base ``tiny:qwen2_5_vl_perception`` (a few CPU minutes) into zoo's
    cache, where ``tiny:qwen2_5_vl_perception`` loads it; its held-out scores are in
    ``perception_scores.json`` beside it.

    Args:
        out: Build into this directory instead of the cache (``tiny:`` does not look there).
        steps: SFT steps instead of the recipe's (only with ``out``: the cache holds the recipe's
            base).
        seed: Seed of the SFT data and order (only with ``out``).
    """
    if out is None and (steps is not None or seed != 0):
        raise ValueError("--steps and --seed change the base, so they need --out: the cache holds the recipe's")
    path = build(out, steps, seed) if out is not None else Path(resolve())
    print(json.dumps(json.loads((path / "perception_scores.json").read_text()), indent=2))
    print(f"[zoo] build-base: tiny:{FAMILY} is in {path}")
