"""Peak memory of one scoring pass at Qwen2.5-VL-3B's widths: the full-logits path against the
chunked one (`zoo.PolicyModule.score_chunk_tokens`).

``python -m zoo.tools.scale`` builds, offline and with random weights, a Qwen2.5-VL with the 3B's
widths and vocabulary but few layers, then runs one forward + backward of the completion tokens'
log-probs (what a GRPO micro-batch costs beyond its layers' activations) for each setting, each in a
fresh process, and reports the resident-memory high-water mark over the pass and how it grows with
the scored tokens.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch

MIB = 2**20


def real_width_config(text_layers: int, vision_blocks: int):
    """The tiny Qwen2.5-VL's tokenizer ids with the 3B's widths and vocabulary (its head tied),
    ``text_layers`` decoder layers and ``vision_blocks`` vision blocks (`zoo.qwen_vl`'s
    ``tiny:qwen2_5_vl_3b`` recipe)."""
    from zoo.qwen_vl import _qwen2_5_vl_3b

    config, _ = _qwen2_5_vl_3b(text_layers, vision_blocks)
    return config


@dataclass
class Shape:
    """The model and the rows a measured pass runs (see `Scale` for each field)."""

    rows: int = 16
    prompts: int = 4
    text_layers: int = 1
    vision_blocks: int = 1
    dtype: str = "bfloat16"
    image_size: int = 224
    lean_activations: bool = True
    gradient_checkpointing: bool = False


@dataclass(kw_only=True)
class Setting(Shape):
    """One measured pass: ``rows`` completions of ``length`` tokens, chunked or not."""

    length: int
    chunk: int | None


def measure(setting: Setting) -> dict:
    """Build the policy, then score ``rows x length`` random completion tokens (no EOS: every
    token counts) once, forward and backward; resident-memory figures in MiB."""
    from transformers import AutoModelForImageTextToText

    from zoo import QwenVLPolicy
    from zoo.policy import DTYPES
    from zoo.rollout.rollout import Rollout

    class RealWidth(QwenVLPolicy):
        def load(self, path: str):
            _, processor = super().load(path)
            config = real_width_config(setting.text_layers, setting.vision_blocks)
            return AutoModelForImageTextToText.from_config(config, dtype=DTYPES[setting.dtype]), processor

    torch.manual_seed(0)
    policy = RealWidth(
        "tiny:qwen2_5_vl",
        score_chunk_tokens=setting.chunk,
        lean_activations=setting.lean_activations,
        gradient_checkpointing=setting.gradient_checkpointing,
    )
    policy.configure_model()
    examples = [_example(setting.image_size, seed) for seed in range(setting.prompts)]
    generations = setting.rows // setting.prompts
    ids = torch.randint(0, len(policy.tokenizer) - 20, (setting.rows, setting.length))  # [n, L]
    ids[torch.isin(ids, torch.tensor(policy.eos_ids + policy.banned_ids))] = 0
    mask = torch.ones_like(ids, dtype=torch.bool)
    rollout = Rollout(
        examples,
        policy.encode(examples),
        generations,
        ids,
        mask,
        torch.ones(len(ids), dtype=torch.bool),
        [""] * len(ids),
    )
    rows = torch.arange(setting.rows)
    before = _resident_mib()
    _reset_peak()
    start = time.process_time()
    out = policy.token_scores(rollout, rows)
    (-(out["logps"] * mask).sum()).backward()  # the entropy is a metric, as in GRPO's default
    return {
        "setting": asdict(setting),
        "tokens": int(mask.sum()),
        "before_mib": before,
        "peak_mib": _peak_mib(),
        "cpu_s": time.process_time() - start,
        "parameters": sum(p.numel() for p in policy.model.parameters()),
    }


def _example(size: int, seed: int):
    """A prompt with one random-noise image of ``size`` pixels a side."""
    import numpy as np
    from PIL import Image

    from tasks import Example

    image = Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8))
    content = [{"type": "image", "image": image}, {"type": "text", "text": "Describe the picture."}]
    return Example([{"role": "user", "content": content}], "", "scale")


def _resident_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def _reset_peak() -> None:
    """Restart the kernel's resident high-water mark (Linux >= 4.0), so building the model does
    not count."""
    Path("/proc/self/clear_refs").write_text("5")


def _peak_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line ``MiB = a + b * tokens`` through ``(tokens, MiB)``: ``(a, b)``."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / max(sum((x - mx) ** 2 for x, _ in points), 1e-9)
    return my - b * mx, b


@dataclass
class Scale(Shape):
    """Peak memory of one scoring forward + backward at Qwen2.5-VL-3B's widths, chunked or not.

    The model has random weights, built offline; each setting runs in a fresh process.

    Args:
        lengths: Completion lengths measured with the chunked path.
        full_lengths: Completion lengths also measured with the full-logits path (about 3.3 MiB
            per token at this vocabulary: keep rows x length small enough for the machine).
        chunk: ``score_chunk_tokens`` of the chunked path.
        rows: Completion rows per pass (prompts x G).
        prompts: Distinct prompts (one image each) among the rows.
        text_layers: Decoder layers (the 3B has 36).
        vision_blocks: Vision blocks (the 3B has 32).
        dtype: Parameter dtype.
        image_size: Side of each prompt's image, in pixels.
        lean_activations: The policy's ``lean_activations`` (`zoo.activations`).
        gradient_checkpointing: The policy's ``gradient_checkpointing``.
        json: Also write every measurement to this file.
    """

    lengths: list[int] = field(default_factory=lambda: [128, 256, 512])
    full_lengths: list[int] = field(default_factory=lambda: [32, 64, 128])
    chunk: int = 256
    json: str | None = None

    def __call__(self) -> list[dict]:
        shape = {f.name: getattr(self, f.name) for f in fields(Shape)}
        settings = [Setting(length=n, chunk=None, **shape) for n in self.full_lengths]
        settings += [Setting(length=n, chunk=self.chunk, **shape) for n in self.lengths]
        results = [self._run(s) for s in settings]
        print(table(results))
        if self.json:
            Path(self.json).write_text(json.dumps(results, indent=2))
        return results

    @staticmethod
    def _run(setting: Setting) -> dict:
        command = [sys.executable, "-m", "zoo.tools.scale", "--child", json.dumps(asdict(setting))]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{setting}: {result['peak_mib'] - result['before_mib']:.0f} MiB over the pass", flush=True)
        return result


def table(results: list[dict]) -> str:
    """Markdown rows per setting, then per path the fitted MiB per scored token."""
    lines = [
        "| path | rows x length | scored tokens | peak rise over the pass (MiB) | rise / token (MiB) | CPU s |",
        "|---|---|---|---|---|---|",
    ]
    paths: dict[str, list[tuple[int, float]]] = {}
    for r in results:
        s, added = r["setting"], r["peak_mib"] - r["before_mib"]
        path = "full logits" if s["chunk"] is None else f"chunked ({s['chunk']})"
        paths.setdefault(path, []).append((r["tokens"], added))
        cells = [path, f"{s['rows']} x {s['length']}", r["tokens"], f"{added:,.0f}", f"{added / r['tokens']:.3f}"]
        lines.append("| " + " | ".join(map(str, [*cells, f"{r['cpu_s']:.0f}"])) + " |")
    for path, points in paths.items():
        if len(points) > 1:
            a, b = fit(points)
            lines.append(f"{path}: {a:,.0f} MiB + {b:.3f} MiB per scored token (least squares)")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        torch.set_num_threads(int(os.environ.get("ZOO_SCALE_THREADS", torch.get_num_threads())))
        print(json.dumps(measure(Setting(**json.loads(sys.argv[2])))))
    else:
        from jsonargparse import auto_cli

        auto_cli(Scale)()
