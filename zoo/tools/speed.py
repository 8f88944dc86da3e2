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
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch


@dataclass
class Settings:
    """What both frameworks run with.

    Args:
        model: The policy: a hub id, a local directory or ``tiny:<family>`` (`zoo.tiny`).
        prompts: Prompts per step.
        generations: Completions sampled per prompt.
        max_new_tokens: Completion length (sampling stops at EOS, or here).
        steps: Timed steps, after the warm-up.
        warmup: Steps run first and not timed.
        lr: AdamW learning rate.
        dtype: Model dtype: float32, bfloat16 or float16.
        image_size: Side of the synthetic square images, in pixels.
        seed: Selects the prompts and seeds the sampling.
        share_prefix: zoo only: prefill each prompt once (TRL repeats prompts G times).
        cache_implementation: zoo only: ``dynamic`` or ``static`` KV cache for sampling.
        text_layers: With ``tiny:qwen2_5_vl_3b``: build it in memory (random weights, seeded) with
            only this many decoder layers, its widths and vocabulary kept, instead of the saved
            36-layer model; None loads ``model`` as it is.
        vision_blocks: The vision blocks of that in-memory model.
        suppress_eos: Never sample an EOS id, in both frameworks, so every completion runs to
            ``max_new_tokens`` and both do the same decoding work.
        loop: zoo only: the decoding loop of `zoo.rollout.HFEngine` (``zoo``, ``forward`` or
            ``generate``).
        max_pixels: Upper bound on the pixels of an image after both frameworks' processor resize
            (reloaded with it, as `zoo.QwenVLPolicy` loads one); None keeps the processor's (the
            tiny ones stop at 224 x 224, so 448 px images need ``200704``).
    """

    model: str = "tiny:qwen2_5_vl"
    prompts: int = 4
    generations: int = 8
    max_new_tokens: int = 16
    steps: int = 6
    warmup: int = 2
    lr: float = 1e-5
    dtype: str = "float32"
    image_size: int = 56
    seed: int = 0
    share_prefix: bool = True
    cache_implementation: str = "dynamic"
    text_layers: int | None = None
    vision_blocks: int = 1
    suppress_eos: bool = False
    loop: str = "zoo"
    max_pixels: int | None = None


def _in_memory(settings: Settings) -> tuple | None:
    """``(model, processor)`` of a ``tiny:qwen2_5_vl_3b`` cut to ``text_layers`` decoder layers,
    or None when ``model`` is loaded as it is."""
    if settings.text_layers is None:
        return None
    if settings.model != "tiny:qwen2_5_vl_3b":
        raise ValueError(f"text_layers needs model tiny:qwen2_5_vl_3b, got {settings.model!r}")
    from transformers import AutoModelForImageTextToText

    from zoo.policy import DTYPES
    from zoo.qwen_vl import _qwen2_5_vl_3b

    config, processor = _qwen2_5_vl_3b(settings.text_layers, settings.vision_blocks)
    torch.manual_seed(settings.seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=DTYPES[settings.dtype])
    model.generation_config.eos_token_id = config.get_text_config().eos_token_id
    model.generation_config.pad_token_id = config.get_text_config().pad_token_id
    return model, processor


def _bounded(processor, settings: Settings):
    """``processor`` saved and loaded again with ``settings.max_pixels`` (what a user's
    ``max_pixels`` does), or as it is without one."""
    if settings.max_pixels is None:
        return processor
    from transformers import AutoProcessor

    from zoo.qwen_vl import pixel_bounds

    with tempfile.TemporaryDirectory() as folder:
        processor.save_pretrained(folder)
        return AutoProcessor.from_pretrained(folder, **pixel_bounds(None, settings.max_pixels))


def _zoo_policy(settings: Settings, **kwargs):
    """zoo's policy for ``settings``: the in-memory model if any, EOS banned if asked."""
    from zoo import QwenVLPolicy

    built = _in_memory(settings)

    class Policy(QwenVLPolicy):
        def load(self, path: str):
            model, processor = super().load(path) if built is None else built
            return model, _bounded(processor, settings)

        def _banned_ids(self, vocab: int) -> list[int]:
            banned = super()._banned_ids(vocab)
            return sorted({*banned, *self.eos_ids}) if settings.suppress_eos else banned

    return Policy("tiny:qwen2_5_vl" if built is not None else settings.model, **kwargs)


def _task():
    from tasks import Rotation

    return Rotation(labels="letters", answer_format="bare")


def _source(settings: Settings):
    from datamodules import SyntheticScenes

    return SyntheticScenes(
        size=settings.prompts * (settings.steps + settings.warmup) + 8,
        image_size=settings.image_size,
        seed=settings.seed,
    )


def _peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


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
    data = PretextDataModule(_source(settings), _task(), batch_size=settings.prompts, val_size=0, seed=settings.seed)
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
    return {"steps": clock.steps, "peak_gib": _peak_memory_gib(strategy.root_device)}


def _trl_dataset(settings: Settings):
    """The rotation prompts as a TRL conversational dataset with an ``image`` column."""
    from datasets import Dataset

    task = _task()
    source = _source(settings)
    rows = []
    for i in range(settings.prompts * (settings.steps + settings.warmup)):
        example = task.make_example(source[i], random.Random(settings.seed * 100_003 + i))
        content = example.messages[0]["content"]
        rows.append(
            {
                "prompt": [
                    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": content[-1]["text"]}]}
                ],
                "image": next(p["image"] for p in content if p["type"] == "image"),
                "answer": example.answer,
            }
        )
    return Dataset.from_list(rows)


def run_trl(settings: Settings) -> dict:
    """Seconds and completion tokens of each TRL ``GRPOTrainer`` step with the same settings."""
    from transformers import AutoModelForImageTextToText, AutoProcessor, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from zoo import tiny
    from zoo.policy import DTYPES

    class Clock(TrainerCallback):
        def __init__(self):
            self.steps: list[dict] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.start, self.cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.append({"s": time.perf_counter() - self.start, "cpu_s": time.process_time() - self.cpu})

    def reward(prompts, completions, answer, **kwargs) -> list[float]:  # what the bare rotation task checks
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        return [float(t.strip() == a) for a, t in zip(answer, texts, strict=True)]

    built = _in_memory(settings)
    if built is None:
        path = tiny.resolve(settings.model)
        built = AutoModelForImageTextToText.from_pretrained(path, dtype=DTYPES[settings.dtype])
        built = built, AutoProcessor.from_pretrained(path)
    model, processor = built[0], _bounded(built[1], settings)
    generation = None
    if settings.suppress_eos:  # TRL's own suppression (the image token) is replaced, so keep it
        eos = model.generation_config.eos_token_id
        eos = {*(eos if isinstance(eos, list) else [eos]), processor.tokenizer.eos_token_id} - {None}
        generation = {"suppress_tokens": sorted({model.config.image_token_id, *eos})}
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-speed-"),
        per_device_train_batch_size=settings.prompts * settings.generations,
        num_generations=settings.generations,
        max_completion_length=settings.max_new_tokens,
        max_steps=settings.steps + settings.warmup,
        learning_rate=settings.lr,
        loss_type="dapo",
        beta=0.0,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=settings.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=settings.dtype == "bfloat16",
        shuffle_dataset=False,
        generation_kwargs=generation,
    )
    clock = Clock()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=_trl_dataset(settings),
        processing_class=processor,
        callbacks=[clock],
    )
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "completions/mean_length" in entry]
    for step, entry in zip(clock.steps, logs, strict=True):
        step["tokens"] = int(round(entry["completions/mean_length"] * settings.prompts * settings.generations))
    return {"steps": clock.steps, "peak_gib": _peak_memory_gib(trainer.accelerator.device)}


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
