"""GPU check: a few GRPO steps of a random-init Qwen2.5-VL with 3B shapes under GRPOStrategy and
under GRPOFSDPStrategy (one process), printing step time, tokens/s and peak memory for each.

    python tests/gpu/check_fsdp.py                      # on a CUDA GPU, 3B shapes
    python tests/gpu/check_fsdp.py --shape tiny --cpu   # smoke run of the script itself

Not collected by pytest (CI has no GPU). Results go in docs/performance.md with date and settings.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch
from lightning.pytorch import Callback, Trainer

from datamodules import PretextDataModule, SyntheticScenes
from tasks import Rotation
from zoo import GRPOFSDPStrategy, GRPOStrategy, QwenVLPolicy, tiny

SHAPES = {"3b": "qwen2_5_vl_3b", "tiny": "qwen2_5_vl"}  # shape -> `zoo.tiny` family: Qwen2.5-VL-3B's shapes, or tiny


class RandomQwen25VL(QwenVLPolicy):
    """QwenVLPolicy built from a config with random weights (no checkpoint on disk needed)."""

    def __init__(self, shape: str = "3b", **kwargs):
        super().__init__(pretrained=f"random:{shape}", **kwargs)
        self.shape = shape

    def load(self, path: str):
        from transformers import AutoModelForImageTextToText

        config, processor = tiny.families()[SHAPES[self.shape]].make()
        model = AutoModelForImageTextToText.from_config(config, **self.load_kwargs())
        model.generation_config.eos_token_id = processor.tokenizer.eos_token_id
        return model, processor


class StepTimer(Callback):
    def __init__(self):
        self.rows = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        m = outputs["metrics"]
        self.rows.append((m["perf/sample_s"] + m["perf/score_s"] + m["perf/train_s"], m["perf/tokens_per_s"]))


def run(strategy_name: str, args) -> dict:
    accelerator = "cpu" if args.cpu else "gpu"
    grpo = dict(num_generations=args.g, max_new_tokens=args.new_tokens, micro_batch_size=args.micro_batch)
    strategy = GRPOStrategy(**grpo) if strategy_name == "single" else GRPOFSDPStrategy(param_dtype="bfloat16", **grpo)
    policy = RandomQwen25VL(args.shape, gradient_checkpointing=True, optimizer=partial(torch.optim.AdamW, lr=1e-6))
    data = PretextDataModule(
        SyntheticScenes(size=1000, image_size=args.image), Rotation(answer_format="tags"), batch_size=args.b, val_size=0
    )
    timer = StepTimer()
    trainer = Trainer(
        accelerator=accelerator,
        devices=1,
        max_steps=args.steps,
        strategy=strategy,
        precision="bf16-mixed" if strategy_name == "single" and not args.cpu else "32-true",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        callbacks=[timer],
        limit_val_batches=0,
    )
    if not args.cpu:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.fit(policy, data)
    measured = timer.rows[1:] or timer.rows  # the first step includes warm-up
    return {
        "strategy": strategy_name,
        "step_s": sum(r[0] for r in measured) / len(measured),
        "tokens_per_s": sum(r[1] for r in measured) / len(measured),
        "peak_gib": 0.0 if args.cpu else torch.cuda.max_memory_allocated() / 2**30,
        "wall_s": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="3b")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (with --shape tiny)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--b", type=int, default=4, help="prompts per step")
    parser.add_argument("--g", type=int, default=8, help="completions per prompt")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--image", type=int, default=224, help="synthetic image side in pixels")
    args = parser.parse_args()
    results = [run(name, args) for name in ("single", "fsdp")]
    print(
        f"shape={args.shape} B={args.b} G={args.g} new_tokens={args.new_tokens} image={args.image}px "
        f"micro_batch={args.micro_batch} steps={args.steps} torch={torch.__version__}"
    )
    print("| strategy | step s | tokens/s | peak GiB |\n|---|---|---|---|")
    for r in results:
        print(f"| {r['strategy']} | {r['step_s']:.2f} | {r['tokens_per_s']:.0f} | {r['peak_gib']:.1f} |")


if __name__ == "__main__":
    main()
