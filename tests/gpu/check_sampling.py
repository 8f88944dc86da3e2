"""GPU check of the sampling engine: random-init Qwen2.5-VL with 3B shapes, B prompts x G samples,
timed with and without prefix sharing, with the dynamic and the static KV cache, and with the
compiled decoder.

    python -m tests.gpu.check_sampling                        # on a CUDA GPU, 3B shapes, bf16
    python -m tests.gpu.check_sampling --shape tiny --cpu     # smoke run of the script itself

Not collected by pytest (CI has no GPU). Results go in docs/performance.md with date and settings.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from datamodules import SyntheticScenes
from tasks import Rotation
from tests.gpu.check_fsdp import SHAPES, RandomQwen25VL

SETTINGS = {  # name: (share_prefix, cache_implementation, compile_decode)
    "repeated": (False, "dynamic", False),  # every prompt G times (as before prefix sharing)
    "shared": (True, "dynamic", False),
    "shared+static": (True, "static", False),
    "shared+static+compiled": (True, "static", True),
}


def run(name: str, batches: list, args) -> dict:
    share, cache, compiled = SETTINGS[name]
    policy = RandomQwen25VL(
        args.shape,
        dtype="float32" if args.cpu else "bfloat16",
        share_prefix=share,
        cache_implementation=cache,
        compile_decode=compiled,
    )
    torch.manual_seed(0)  # the same random weights for every setting
    policy.configure_model()
    device = torch.device("cpu" if args.cpu else "cuda")
    policy.to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    seconds, tokens, completions = [], [], []
    for step, examples in enumerate(batches):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        rollout = policy.sample(examples, args.g, max_new_tokens=args.new_tokens, seed=step)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= args.warmup:
            seconds.append(time.perf_counter() - start)
            tokens.append(int(rollout.completion_mask.sum()))
        completions.append(rollout.completion_ids.cpu())
    del policy
    return {
        "name": name,
        "s": statistics.median(seconds),
        "tokens_per_s": statistics.median(t / s for t, s in zip(tokens, seconds, strict=True)),
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else 0.0,
        "completions": completions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="3b")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (with --shape tiny)")
    parser.add_argument("--steps", type=int, default=3, help="timed sampling calls per setting")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls first (compilation happens here)")
    parser.add_argument("--b", type=int, default=4, help="prompts per call")
    parser.add_argument("--g", type=int, default=8, help="completions per prompt")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--image", type=int, default=224, help="synthetic image side in pixels")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated names of SETTINGS")
    args = parser.parse_args()
    task, source = Rotation(answer_format="tags"), SyntheticScenes(size=1000, image_size=args.image)
    batches = [
        [task.make_example(source[args.b * s + i], random.Random(args.b * s + i)) for i in range(args.b)]
        for s in range(args.warmup + args.steps)
    ]
    results = [run(name, batches, args) for name in args.settings.split(",")]
    print(
        f"shape={args.shape} B={args.b} G={args.g} new_tokens={args.new_tokens} image={args.image}px "
        f"steps={args.steps} warmup={args.warmup} torch={torch.__version__}"
    )
    print("| sampling | s per call | completion tokens/s | peak GiB | same completions as the first row |")
    print("|---|---|---|---|---|")
    for r in results:
        same = all(torch.equal(a, b) for a, b in zip(r["completions"], results[0]["completions"], strict=True))
        print(f"| {r['name']} | {r['s']:.2f} | {r['tokens_per_s']:.0f} | {r['peak_gib']:.1f} | {same} |")


if __name__ == "__main__":
    main()
