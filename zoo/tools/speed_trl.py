"""TRL's side of `zoo speed`: the same rotation prompts as a TRL dataset, and the steps of its
``GRPOTrainer`` (the ``bench`` extra) with the settings zoo runs."""

from __future__ import annotations

import random
import tempfile
import time

import torch

from zoo.tools.speed_setup import Settings, bounded, in_memory, peak_memory_gib, rotation_task, scenes


def _trl_dataset(settings: Settings):
    """The rotation prompts as a TRL conversational dataset with an ``image`` column."""
    from datasets import Dataset

    task = rotation_task()
    source = scenes(settings)
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

    built = in_memory(settings)
    if built is None:
        path = tiny.resolve(settings.model)
        built = AutoModelForImageTextToText.from_pretrained(path, dtype=DTYPES[settings.dtype])
        built = built, AutoProcessor.from_pretrained(path)
    model, processor = built[0], bounded(built[1], settings)
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
    return {"steps": clock.steps, "peak_gib": peak_memory_gib(trainer.accelerator.device)}
