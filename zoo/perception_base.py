"""``tiny:qwen2_5_vl_perception``: a small pretrained base built offline with zoo itself, the random-init tiny
Qwen2.5-VL after supervised fine-tuning (`zoo.sft.SFTStrategy`) on zoo's labelled synthetic perception corpus
(`datamodules.SyntheticQuestions`, train split: spatial relations, counts, relative depth, temporal order, one
lettered answer each, the answer format of the pretext tasks). Cached beside the tiny models under a key that
hashes every file that decides the weights, and rebuilt the same on every machine (fixed seeds, one thread).

Build or rebuild by hand: ``python -m zoo.perception_base OUT_DIR [--steps N]``; its scores on the held-out
test split are written to ``OUT_DIR/perception_scores.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch

from zoo import tiny

FAMILY = "qwen2_5_vl_perception"
STEPS = 2400
BATCH = 16
#: 2e-3 (the first recipe) left every kind at its answer prior: the loss sat at the prior's from step 50 on
#: (counting alone, 300 steps); at 1e-3 one kind alone leaves the prior after 200-400 steps.
LR = 1e-3
#: The files whose contents decide the built weights (paths from the repository root), besides the tiny
#: model's own builders (`zoo.tiny.version`).
INPUTS = ("zoo/perception_base.py", "zoo/sft/strategy.py", "zoo/sft/functional.py",
          "zoo/sft/demonstrations.py", "datamodules/sources/synthetic_questions.py", "datamodules/sources/shapes.py",
          "datamodules/sources/synthetic_rgbd.py", "tasks/mcq.py", "tasks/answers.py")


def corpus(split: str = "train", size: int = 10**6, seed: int = 0):
    """The perception questions (`datamodules.SyntheticQuestions`) of ``split``, every kind in turn."""
    from datamodules import SyntheticQuestions

    return SyntheticQuestions(split=split, size=size, seed=seed)


def question_task():
    """How the corpus and the downstream benchmarks are asked: options in stored order, one bare letter."""
    from tasks import MultipleChoice

    return MultipleChoice(labels="letters", shuffle_choices=False, answer_format="bare")


def sft(policy, steps: int, seed: int = 0, lr: float = LR, batch: int = BATCH, callbacks: list | None = None):
    """``steps`` SFT steps of ``policy`` (AdamW ``lr``, betas 0.9 / 0.99, no weight decay, clip 1.0) on the
    training corpus drawn with ``seed``; used to build the base and as the continued-SFT control of `zoo repro`."""
    from lightning.pytorch import Trainer, seed_everything

    from datamodules import PretextDataModule
    from zoo.sft import SFTStrategy

    seed_everything(seed, verbose=False)
    policy.optimizer_factory = lambda params: torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    data = PretextDataModule(corpus(seed=seed), question_task(), batch_size=batch, val_size=0, seed=seed)
    trainer = Trainer(max_steps=steps, strategy=SFTStrategy(max_new_tokens=1), logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0, limit_val_batches=0, callbacks=callbacks or [])
    trainer.fit(policy, data)
    return trainer


def build(out_dir: str | Path, steps: int = STEPS, seed: int = 0) -> Path:
    """SFT the random-init ``tiny:qwen2_5_vl`` for ``steps`` steps and save it, with its held-out scores, to
    ``out_dir``."""
    from zoo import QwenVLPolicy
    from zoo.tools.repro.downstream import downstream_scores

    torch.set_num_threads(1)  # the same float sums on every machine
    start, cpu = time.perf_counter(), time.process_time()
    policy = QwenVLPolicy(tiny.resolve("tiny:qwen2_5_vl"))
    sft(policy, steps, seed, lr=LR, batch=BATCH)  # the module's values now, as `key` reads them
    out = Path(out_dir)
    policy.save_pretrained(str(out))
    built = {"steps": steps, "batch": BATCH, "lr": LR, "wall_s": time.perf_counter() - start,
             "cpu_s": time.process_time() - cpu, "parameters": sum(p.numel() for p in policy.model.parameters())}
    built["scores"] = downstream_scores(policy)
    (out / "perception_scores.json").write_text(json.dumps(built, indent=2))
    return out


def key() -> str:
    """A hash of every input of the build: a change to any of them builds a new base."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1(f"{STEPS} {BATCH} {LR} {tiny.version()}".encode())
    for name in INPUTS:
        digest.update((root / name).read_bytes())
    return digest.hexdigest()[:10]


def resolve() -> str:
    """The cached base's directory, built on first use (a few CPU minutes), published atomically."""
    target = tiny.cache_dir() / f"{FAMILY}-{key()}"
    if not (target / "config.json").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{FAMILY}-"))
        build(tmp, STEPS)
        try:
            tmp.rename(target)
        except OSError:  # another process published it first
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = build(args.out_dir, args.steps, args.seed)
    print(json.dumps(json.loads((out / "perception_scores.json").read_text()), indent=2))


if __name__ == "__main__":
    main()
