"""Measures padded against packed scoring (`zoo.PolicyModule.pack_sequences`) on the tiny
Qwen2.5-VL: one forward + backward over 8 rows of very unequal completion lengths (4 rows of 4
tokens, 4 of 128; 2 prompts x G 4, one image each), CPU seconds (one torch thread, the settings
taking turns in one process, medians) and the peak resident memory rise of one pass (each in a
fresh process, taking turns). ``python -m tests.zoo.packing_measure [--pairs 15] [--memory 5]``;
docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time

import torch

SHORT, LONG, G = 4, 128, 4


def setup(packed: bool, width: str = "tiny"):
    """The policy (``width`` ``tiny``, or ``3b``: Qwen2.5-VL-3B's widths and vocabulary with one
    text layer and one vision block, bfloat16, `zoo.tools.scale`) and a rollout of 2 prompts x G 4:
    the first 2 rows of each group end after `SHORT` tokens (EOS counted), the others run `LONG`."""
    from transformers import AutoModelForImageTextToText

    from tasks import Rotation
    from tests.helpers import make_item
    from zoo import QwenVLPolicy
    from zoo.tools.scale import real_width_config

    class RealWidth(QwenVLPolicy):
        def load(self, path: str):
            _, processor = super().load(path)
            return AutoModelForImageTextToText.from_config(real_width_config(1, 1), dtype=torch.bfloat16), processor

    torch.manual_seed(0)
    policy = (RealWidth if width == "3b" else QwenVLPolicy)(pretrained="tiny:qwen2_5_vl", pack_sequences=packed)
    policy.configure_model()
    task = Rotation(answer_format="bare")
    examples = [task.make_example(make_item("image", i), random.Random(i)) for i in range(2)]
    prompts = policy.encode(examples)
    banned = set(policy.banned_ids + policy.eos_ids)
    allowed = torch.tensor([i for i in range(len(policy.tokenizer)) if i not in banned])
    ids = allowed[torch.randint(len(allowed), (2 * G, LONG), generator=torch.Generator().manual_seed(0))]
    for row in range(2 * G):
        if row % G < G // 2:
            ids[row, SHORT - 1] = policy.eos_ids[0]
    return policy, policy._rollout(examples, prompts, G, ids, 1.0)


def one_pass(policy, rollout) -> None:
    """Forward + backward of every row's log-probs and entropy, as a GRPO training pass."""
    policy.model.zero_grad(set_to_none=True)
    scores = policy.token_scores(rollout, torch.arange(rollout.size))
    mask = rollout.completion_mask
    (-(scores["logps"] * mask).sum() - 0.1 * (scores["entropy"] * mask).sum()).backward()


def times(pairs: int, width: str) -> dict[str, list[float]]:
    policy, rollout = setup(False, width)
    out = {"padded": [], "packed": []}
    for _ in range(pairs + 1):  # the first pair warms up
        for name in out:
            policy.pack_sequences = name == "packed"
            start = time.process_time()
            one_pass(policy, rollout)
            out[name].append(time.process_time() - start)
    return {name: values[1:] for name, values in out.items()}


def peak_rise_mib(packed: bool, width: str) -> float:
    """In this process: the resident high-water mark over one pass (restarted after the setup)
    minus the resident memory before it."""
    from zoo.tools.scale import _peak_mib, _reset_peak, _resident_mib

    policy, rollout = setup(packed, width)
    before = _resident_mib()
    _reset_peak()
    one_pass(policy, rollout)
    return _peak_mib() - before


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--memory", type=int, default=5)
    parser.add_argument("--width", choices=["tiny", "3b"], default="tiny")
    parser.add_argument("--peak", choices=["padded", "packed"])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.peak:
        print(peak_rise_mib(args.peak == "packed", args.width))
        return
    policy, rollout = setup(True, args.width)
    lengths = rollout.prompts.tensors["attention_mask"].sum(1).tolist(), rollout.completion_mask.sum(1).tolist()
    print(f"prompt tokens {lengths[0]}, completion tokens {lengths[1]}")
    real = sum(lengths[0][r // G] + lengths[1][r] for r in range(2 * G))
    print(f"tokens per pass: padded {2 * G * (max(lengths[0]) + LONG)}, packed {real}")
    for name, values in times(args.pairs, args.width).items():
        print(f"{name}: median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})")
    peaks = {"padded": [], "packed": []}
    for _ in range(args.memory):
        for name in peaks:
            cmd = [sys.executable, "-m", "tests.zoo.packing_measure", "--peak", name, "--width", args.width]
            peaks[name].append(
                float(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()[-1])
            )
    for name, values in peaks.items() if args.memory else ():
        print(f"{name}: peak rise median {statistics.median(values):.1f} MiB ({', '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
