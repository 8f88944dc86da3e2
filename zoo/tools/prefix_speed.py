"""The training pass with each prompt scored once for its G completions
(`zoo.PolicyModule.score_prefix_once`) against whole prompt + completion rows: CPU time of one
scoring forward + backward (the two settings taking turns in one process) and the activations its
forward keeps for the backward.

``python -m zoo.tools.prefix_speed`` scores B prompts of one random image each, G random completions
of each (every token counted, as when all run to the token limit), on the tiny Qwen2.5-VL.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import torch

from zoo.tools.scale import MIB, _example


def rollout_of(policy, image_size: int, prompts: int, generations: int, length: int):
    """``prompts`` one-image prompts and ``generations`` random completions of ``length`` tokens
    each (no EOS, no banned token)."""
    from zoo.rollout.rollout import Rollout

    examples = [_example(image_size, seed) for seed in range(prompts)]
    n = prompts * generations
    ids = torch.randint(0, len(policy.tokenizer) - 20, (n, length))  # [N, L]
    ids[torch.isin(ids, torch.tensor(policy.eos_ids + policy.banned_ids))] = 0
    mask = torch.ones_like(ids, dtype=torch.bool)
    truncated = torch.zeros(n, dtype=torch.bool)
    return Rollout(examples, policy.encode(examples), generations, ids, mask, truncated, [""] * n)


def one_pass(policy, rollout, once: bool) -> float:
    """CPU seconds of one training pass: scores, then the backward of a GRPO-like loss (log-probs
    and an entropy bonus)."""
    policy.score_prefix_once = once
    policy.model.zero_grad(set_to_none=True)
    start = time.process_time()
    out = policy.token_scores(rollout, torch.arange(rollout.size))
    (-(out["logps"].sum()) - 0.01 * out["entropy"].sum()).backward()
    return time.process_time() - start


def saved_mib(policy, rollout, once: bool) -> float:
    """MiB of the tensors the training pass's forward keeps for its backward (each storage once,
    parameters left out): the activations, what a pass's peak memory grows with."""
    params = {p.untyped_storage().data_ptr() for p in policy.model.parameters()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    policy.score_prefix_once = once
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = policy.token_scores(rollout, torch.arange(rollout.size))
    del out
    return sum(saved.values()) / MIB


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


@dataclass
class PrefixSpeed:
    """Training-pass CPU time and peak memory, whole rows against the prefix scored once.

    Args:
        image_sizes: Side of each prompt's image, in pixels.
        lengths: Completion tokens per row.
        prompts: B, prompts per pass.
        generations: G, completions per prompt.
        repeats: Passes per setting (after one untimed pass of each); the settings alternate.
        pretrained: The policy's checkpoint.
        max_pixels: The processor's bound on pixels per image (the tiny checkpoint's own is 224 x
            224).
        json: Also write every measurement to this file.
    """

    image_sizes: list[int] = field(default_factory=lambda: [56, 224, 448])
    lengths: list[int] = field(default_factory=lambda: [16, 64])
    prompts: int = 4
    generations: int = 8
    repeats: int = 7
    pretrained: str = "tiny:qwen2_5_vl"
    max_pixels: int = 448 * 448
    json: str | None = None

    def __call__(self) -> list[dict]:
        from zoo import QwenVLPolicy

        torch.manual_seed(0)
        policy = QwenVLPolicy(self.pretrained, max_pixels=self.max_pixels)
        policy.configure_model()
        print(
            "| image px | new tokens | prompt tokens | whole rows s | prefix once s | speed-up "
            "| saved for backward MiB, whole rows | prefix once |"
        )
        print("|---|---|---|---|---|---|---|---|")
        results = []
        for size, length in product(self.image_sizes, self.lengths):
            rollout = rollout_of(policy, size, self.prompts, self.generations, length)
            memory = {once: saved_mib(policy, rollout, once) for once in (False, True)}
            runs = {False: [], True: []}
            for i in range(self.repeats + 1):
                for once in (False, True) if i % 2 else (True, False):
                    seconds = one_pass(policy, rollout, once)
                    if i:  # the first round warms up
                        runs[once].append(seconds)
            results.append(self._report(size, length, rollout, runs, memory))
        if self.json:
            Path(self.json).write_text(json.dumps(results, indent=2))
        return results

    def _report(self, size: int, length: int, rollout, runs: dict, memory: dict) -> dict:
        prompt = int(rollout.prompts.tensors["attention_mask"].sum(1).max())
        ratios = [w / o for w, o in zip(runs[False], runs[True], strict=True)]
        cells = [size, length, prompt, summary(runs[False]), summary(runs[True]), summary(ratios) + "x"]
        cells += [f"{memory[False]:.1f}", f"{memory[True]:.1f}"]
        print("| " + " | ".join(map(str, cells)) + " |", flush=True)
        return {
            "image_size": size,
            "length": length,
            "prompt_tokens": prompt,
            "whole_s": runs[False],
            "once_s": runs[True],
            "whole_saved_mib": memory[False],
            "once_saved_mib": memory[True],
        }


if __name__ == "__main__":
    from jsonargparse import auto_cli

    torch.set_num_threads(1)
    auto_cli(PrefixSpeed)()
