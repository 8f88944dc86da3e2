"""`zoo speed`: GRPO steps of zoo and of TRL's `GRPOTrainer` side by side, on the same model,
prompts and settings.

Each framework runs in a subprocess of its own (clean peak memory, no shared caches), on the same
rotation prompts built from the same synthetic images, with the same group size, completion length,
learning rate, loss and precision. Reported per framework: median seconds per step after warm-up,
completion tokens per second, peak memory; for zoo also the sample / score / train split; and the
zoo/TRL speed ratio.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch

from zoo.tools.speed_setup import Settings, bounded, in_memory, peak_memory_gib, rotation_task, scenes
from zoo.tools.speed_trl import run_trl


def _zoo_policy(settings: Settings, **kwargs):
    """zoo's policy for ``settings``: the in-memory model if any, EOS banned if asked."""
    from zoo import QwenVLPolicy

    built = in_memory(settings)

    class Policy(QwenVLPolicy):
        def load(self, path: str):
            model, processor = super().load(path) if built is None else built
            return model, bounded(processor, settings)

        def _banned_ids(self, vocab: int) -> list[int]:
            banned = super()._banned_ids(vocab)
            return sorted({*banned, *self.eos_ids}) if settings.suppress_eos else banned

    return Policy("tiny:qwen2_5_vl" if built is not None else settings.model, **kwargs)


def run_zoo(settings: Settings) -> dict:
    """Seconds and completion tokens of each zoo step (Lightning Trainer + GRPOStrategy)."""
    from lightning.pytorch import Callback, Trainer, seed_everything

    from datamodules import PretextDataModule
    from zoo import GRPOStrategy
    from zoo.rollout import HFEngine

    class Clock(Callback):
        def __init__(self):
            self.steps: list[dict] = []

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.start, self.cpu = time.perf_counter(), time.process_time()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            rollout = outputs["rollout"]
            metrics = outputs["metrics"]
            self.steps.append(
                {
                    "s": time.perf_counter() - self.start,
                    "cpu_s": time.process_time() - self.cpu,
                    "tokens": int(rollout.completion_mask.sum()),
                    **{k.split("/")[1]: metrics[k] for k in ("perf/sample_s", "perf/score_s", "perf/train_s")},
                }
            )

    seed_everything(settings.seed)
    accelerator = "cuda" if torch.cuda.is_available() else "cpu"
    policy = _zoo_policy(
        settings,
        dtype=settings.dtype,
        share_prefix=settings.share_prefix,
        cache_implementation=settings.cache_implementation,
        engine=HFEngine(loop=settings.loop),
        optimizer=lambda params: torch.optim.AdamW(params, lr=settings.lr),
    )
    data = PretextDataModule(
        scenes(settings), rotation_task(), batch_size=settings.prompts, val_size=0, seed=settings.seed
    )
    clock = Clock()
    strategy = GRPOStrategy(
        num_generations=settings.generations,
        max_new_tokens=settings.max_new_tokens,
        loss_type="dapo",
        beta=0.0,
        device=accelerator,
    )
    trainer = Trainer(
        max_steps=settings.steps + settings.warmup,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock],
        limit_val_batches=0,
        accelerator=accelerator,
        devices=1,
    )
    trainer.fit(policy, data)
    return {"steps": clock.steps, "peak_gib": peak_memory_gib(strategy.root_device)}


RUNNERS = {"zoo": run_zoo, "trl": run_trl}


def summarise(result: dict, warmup: int) -> dict:
    """Medians over the steps after ``warmup``."""
    steps = result["steps"][warmup:]
    seconds = statistics.median(step["s"] for step in steps)
    out = {
        "s_per_step": seconds,
        "completion_tokens_per_s": statistics.median(step["tokens"] / step["s"] for step in steps),
        "peak_gib": result["peak_gib"],
        "steps_timed": len(steps),
    }
    for phase in ("cpu_s", "sample_s", "score_s", "train_s"):
        if phase in steps[0]:
            out[phase] = statistics.median(step[phase] for step in steps)
    return out


def table(summaries: dict[str, dict]) -> str:
    """A plain-text table with the zoo/TRL speed ratio."""
    names = ["s_per_step", "cpu_s", "completion_tokens_per_s", "sample_s", "score_s", "train_s", "peak_gib"]
    lines = [f"{'':26}" + "".join(f"{fw:>14}" for fw in summaries)]
    for name in names:
        cells = [f"{s[name]:14.3f}" if name in s else f"{'-':>14}" for s in summaries.values()]
        lines.append(f"{name:26}" + "".join(cells))
    for name in [n for n in summaries if n.startswith("zoo")] if "trl" in summaries else []:
        ratio = summaries["trl"]["s_per_step"] / summaries[name]["s_per_step"]
        lines.append(f"{name} speed / TRL speed: {ratio:.2f}x (steps per second)")
        if "cpu_s" in summaries["trl"] and "cpu_s" in summaries[name]:
            ratio = summaries["trl"]["cpu_s"] / summaries[name]["cpu_s"]
            lines.append(f"{name} speed / TRL speed: {ratio:.2f}x (CPU seconds per step)")
    return "\n".join(lines)


@dataclass
class Speed(Settings):
    """GRPO steps of zoo and of TRL's GRPOTrainer side by side, on the same model, prompts and
    settings.

    Each framework runs in a subprocess of its own; the table gives the median seconds per step
    (wall and CPU) after the warm-up, completion tokens per second, peak memory and the zoo/TRL
    speed ratios.

    Args:
        frameworks: The frameworks to run, in order: ``zoo``, ``trl`` (the ``bench`` extra), and
            ``zoo:<loop>`` for zoo with another decoding loop (``zoo:generate``: Hugging Face
            ``generate``; ``zoo:forward``: zoo's loop through the model's own forward, without
            `zoo.rollout.lean_step.LeanStep`).
        rounds: Run the frameworks this many times, taking turns (zoo, trl, zoo, trl, ...), so a
            change of machine load falls on all of them; the medians pool the timed steps of every
            round, and the ratio of each round is printed too.
        json: Also write the settings and the summaries to this file.
    """

    frameworks: list[str] = field(default_factory=lambda: ["zoo", "trl"])
    rounds: int = 1
    json: str | None = None

    def __call__(self) -> dict[str, dict]:
        unknown = sorted({f.split(":")[0] for f in self.frameworks} - set(RUNNERS))
        if unknown:
            raise ValueError(f"unknown frameworks {unknown}; choose from {sorted(RUNNERS)}")
        settings = Settings(**{f.name: getattr(self, f.name) for f in fields(Settings)})
        runs = {name: [] for name in self.frameworks}
        for _ in range(self.rounds):
            for name in self.frameworks:
                framework, _, loop = name.partition(":")
                run = Settings(**{**asdict(settings), "loop": loop or settings.loop})
                runs[name].append(_run(framework, run))
        rounds = [table({n: summarise(r[i], settings.warmup) for n, r in runs.items()}) for i in range(self.rounds)]
        summaries = {name: summarise(pooled(results, settings.warmup), 0) for name, results in runs.items()}
        print(f"settings: {asdict(settings)}")
        for i, text in enumerate(rounds if self.rounds > 1 else []):
            print(f"round {i + 1}: " + "; ".join(line for line in text.splitlines() if "TRL speed" in line))
        print(table(summaries))
        if self.json:
            Path(self.json).write_text(json.dumps({"settings": asdict(settings), "results": summaries}, indent=2))
        return summaries


def _run(framework: str, settings: Settings) -> dict:
    """One framework's steps, in a subprocess of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "zoo.tools.speed", framework, str(out), json.dumps(asdict(settings))]
        subprocess.run(command, check=True, cwd=tmp)
        return json.loads(out.read_text())


def pooled(results: list[dict], warmup: int) -> dict:
    """The timed steps (after ``warmup``) of several runs as one run, its peak the largest."""
    steps = [step for result in results for step in result["steps"][warmup:]]
    return {"steps": steps, "peak_gib": max(result["peak_gib"] for result in results)}


def _child(framework: str, out: Path, settings: Settings) -> None:
    """One framework's steps, in the subprocess `Speed` starts."""
    torch.set_num_threads(int(os.environ.get("ZOO_SPEED_THREADS", torch.get_num_threads())))
    out.write_text(json.dumps(RUNNERS[framework](settings)))


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]), Settings(**json.loads(sys.argv[3])))
