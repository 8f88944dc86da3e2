"""`zoo repro tool_use`: a crop tool lets a tiny policy read what its first view cannot
("thinking with images": DeepEyes, arXiv 2505.14362; MGPO, arXiv 2507.05920).

`tasks.ZoomMarker` with ``grid: 2``: a red-bordered marker sits in one of the 4 cells of a 56 px
view and is filled with horizontal or vertical one-pixel stripes, which shrink to the same flat
colour, so the shown views of the two patterns are byte-identical; a crop of the marker's cell shows
them at full resolution. Both arms train the tiny random-init Qwen2.5-VL on the same examples for
the same steps: SFT on the expert transcripts (with the tool: a crop of the marker's cell, then the
letter; without: the letter alone), then GRPO (with the tool: two turns, accuracy + 0.5 x the share
of the marker the crop covers; without: one turn, accuracy). Held-out accuracy is read from greedy
multi-turn rollouts (`zoo.rollout.turns.sample_batch`), with how often the policy calls the tool and
how well its crops hit, before, during and after training.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from lightning.pytorch import Callback, Trainer, seed_everything

from datamodules import PretextDataModule, SyntheticScenes
from tasks import ZoomMarker
from zoo.tools.repro.common import MODEL, Options, Recorder, claim_rows, verdict_line
from zoo.tools.repro.transfer import seed_stats

CLAIM = (
    "a crop tool lets a tiny policy read what its first view cannot: held-out accuracy with the tool beats "
    "the same SFT+GRPO budget without it"
)
#: GRPO steps per arm (``--steps``); each arm first runs ``SFT_RATIO`` times as many SFT steps.
STEPS = 40
SFT_RATIO = 5
#: Declared before any run: held when the with-tool arm's mean held-out accuracy beats the arm
#: without the tool by more than MARGIN and the larger seed standard deviation. Chance is 0.5 (two
#: patterns), and without the tool the view cannot tell them apart, so that arm should stay near
#: 0.5.
MARGIN = 0.10
#: The task of both arms: configs/tools/zoom_sft.yaml's with an 8 px marker (a 4 px one and SFT at
#: lr 3e-3 collapsed to one crop and one letter in the recipe search, docs/reproductions.md).
TASK = dict(view_size=56, zoom=4, grid=2, marker=8, crop_pixels=112 * 112, answer_format="bare")
SCENES = dict(image_size=224)
BATCH = 8  # prompts per step, SFT and GRPO
GROUP = 8  # G of the GRPO stage
MAX_TOKENS = 32  # over all turns of a row, in GRPO and at evaluation
SFT_LR = 1e-3
GRPO_LR = 3e-4
ENTROPY = 0.02


@dataclass
class ToolArm:
    """An arm of the claim: ``tools`` decides whether the policy may crop."""

    name: str
    tools: bool


ARMS = [ToolArm("with tool", True), ToolArm("without tool", False)]


def held_out(policy, data: PretextDataModule) -> dict[str, float]:
    """Greedy multi-turn rollouts of the held-out examples: mean ``accuracy``, ``grounding`` (the
    share of the marker the first crop covers), ``calls`` (the share of rows that call the tool),
    ``format`` (the share of well-formed transcripts), ``hits`` (rows whose first crop covers the
    whole marker), ``accuracy on a hit`` (their accuracy: does the policy read what its crop
    shows) and ``majority`` (the share of the commonest answer turn: 1.0 when one letter answers
    every item)."""
    from zoo.rollout.turns import MultiTurnRollout, sample_batch

    (task,) = data.tasks.values()
    parts: dict[str, list[float]] = {}
    answers: list[str] = []
    for batch in data.val_dataloader():
        rollout = sample_batch(policy, data, batch, 1, max_new_tokens=MAX_TOKENS, greedy=True)
        multi = isinstance(rollout, MultiTurnRollout)
        for i, (example, text) in enumerate(zip(batch, rollout.completions, strict=True)):
            reward = task.verify(example, text)
            for part in ("accuracy", "grounding", "format"):
                parts.setdefault(part, []).append(reward.parts.get(part, 0.0))
            parts.setdefault("calls", []).append(float(multi and rollout.calls[i] > 0))
            if reward.parts.get("grounding", 0.0) == 1.0:  # the crop shows the whole marker
                parts.setdefault("accuracy on a hit", []).append(reward.parts["accuracy"])
            read = task.read(text)
            answers.append(read[1].strip() if read else "")
    out = {part: sum(v) / len(v) for part, v in parts.items()}
    out["hits"] = len(parts.get("accuracy on a hit", []))
    out["majority"] = Counter(answers).most_common(1)[0][1] / len(answers)
    return out


class Probe(Callback):
    """Records `held_out` every ``every`` training steps of a stage: ``curve`` holds
    ``(step, stage, scores)`` with steps counted over the arm's stages."""

    def __init__(self, data: PretextDataModule, every: int, start: int, stage: str, curve: list):
        self.data, self.every, self.start, self.stage, self.curve = data, every, start, stage, curve
        self.batches = 0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.batches += 1
        if self.every and self.batches % self.every == 0:
            self.curve.append((self.start + self.batches, self.stage, held_out(module, self.data)))
            print(f"[repro] {self.stage} step {self.batches}: {_scores(self.curve[-1][2])}", flush=True)


def _scores(scores: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in scores.items())


def _fit(policy, strategy, steps: int, lr: float, data, callbacks: list) -> None:
    policy.optimizer_factory = lambda params: torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    Trainer(
        max_steps=steps,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    ).fit(policy, data)


def grpo_curve(steps: list[dict], bins: int = 4) -> list[dict[str, float]]:
    """The GRPO stage's training metrics in ``bins`` equal windows of steps: the mean reward,
    accuracy, grounding, tool calls per row and share of rows ending on an invalid action, of the
    sampled rows (temperature 1)."""
    keys = {
        "reward": "train/reward",
        "accuracy": "train/reward/zoom_marker/accuracy",
        "grounding": "train/reward/zoom_marker/grounding",
        "calls": "train/tools/calls",
        "invalid": "train/tools/invalid",
    }
    size = max(1, len(steps) // bins)
    out = []
    for start in range(0, len(steps), size):
        window = steps[start : start + size]
        row = {"steps": start + len(window)}
        for name, key in keys.items():
            values = [s[key] for s in window if key in s]
            if values:
                row[name] = sum(values) / len(values)
        out.append(row)
    return out


def run_tool_arm(arm: ToolArm, seed: int, steps: int, probe_every: int, size: int) -> dict:
    """SFT for ``SFT_RATIO * steps`` steps, then ``steps`` GRPO steps, from the tiny random-init
    checkpoint; the row: held-out scores before and after, the held-out curve, the GRPO curve."""
    from zoo import GRPOStrategy, QwenVLPolicy
    from zoo.sft import SFTStrategy

    seed_everything(seed, verbose=False)
    start, cpu = time.perf_counter(), time.process_time()
    policy = QwenVLPolicy(MODEL)
    policy.configure_model()
    data = PretextDataModule(
        SyntheticScenes(**SCENES), ZoomMarker(**TASK, tools=arm.tools), batch_size=BATCH, val_size=size, seed=seed
    )
    data.setup("validate")
    before = held_out(policy, data)
    curve = [(0, "start", before)]
    sft = SFT_RATIO * steps
    probe = Probe(data, SFT_RATIO * probe_every, 0, "sft", curve)
    _fit(policy, SFTStrategy(max_new_tokens=MAX_TOKENS), sft, SFT_LR, data, [probe])
    after_sft = held_out(policy, data)
    recorder = Recorder(arm.name, every=10)
    grpo = GRPOStrategy(num_generations=GROUP, max_new_tokens=MAX_TOKENS, entropy_coef=ENTROPY)
    _fit(policy, grpo, steps, GRPO_LR, data, [Probe(data, probe_every, sft, "grpo", curve), recorder])
    after = held_out(policy, data)
    return {
        "arm": arm.name,
        "seed": seed,
        "steps": steps,
        "sft_steps": sft,
        "task": TASK,
        "before": before,
        "after_sft": after_sft,
        "after": after,
        "curve": curve,
        "grpo_curve": grpo_curve(recorder.steps),
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
    }


def accuracy(row: dict) -> float:
    return row["after"]["accuracy"]


def verdict(rows: list[dict]) -> tuple[bool | None, str]:
    """Held if the with-tool arm's mean held-out accuracy beats the arm without the tool by more
    than `MARGIN` and the larger seed standard deviation."""
    tool = seed_stats(rows, "with tool", accuracy)
    plain = seed_stats(rows, "without tool", accuracy)
    if not tool[2] or not plain[2]:
        return None, "needs both arms"
    bar = max(MARGIN, tool[1], plain[1])
    gap = tool[0] - plain[0]
    calls = seed_stats(rows, "with tool", lambda r: r["after"]["calls"])[0]
    grounding = seed_stats(rows, "with tool", lambda r: r["after"]["grounding"])[0]
    return gap > bar, (
        f"held-out accuracy with the tool {tool[0]:.3f} ± {tool[1]:.3f}, without {plain[0]:.3f} ± {plain[1]:.3f} "
        f"(gap {gap:+.3f}, needs > {bar:.3f}; chance 0.5); with the tool {calls:.2f} of rows call it, "
        f"crops cover {grounding:.2f} of the marker"
    )


def table(rows: list[dict]) -> str:
    """Per seed: held-out accuracy, calls, grounding and answer majority before -> after SFT ->
    after GRPO."""
    parts = ("accuracy", "calls", "grounding", "majority")
    head = ["arm", "seed", "SFT + GRPO steps", *[f"held-out {p}" for p in parts], "CPU min"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["arm"], str(r["seed"]), f"{r['sft_steps']} + {r['steps']}"]
        cells += [" -> ".join(f"{r[k][p]:.2f}" for k in ("before", "after_sft", "after")) for p in parts]
        lines.append("| " + " | ".join(cells + [f"{r['cpu_s'] / 60:.1f}"]) + " |")
    return "\n".join(lines)


def curves(rows: list[dict]) -> str:
    """The learning curves of each row: held-out (greedy) and GRPO training (sampled) calls,
    grounding and accuracy."""
    lines = []
    for r in rows:
        held = "; ".join(
            f"{step} {stage}: acc {s['accuracy']:.2f} calls {s['calls']:.2f} grounding {s['grounding']:.2f}"
            + (f" hit acc {s['accuracy on a hit']:.2f} of {s['hits']}" if s.get("hits") else "")
            for step, stage, s in r["curve"]
        )
        train = "; ".join(
            f"to {w['steps']}: " + " ".join(f"{k} {v:.2f}" for k, v in w.items() if k != "steps")
            for w in r["grpo_curve"]
        )
        lines.append(f"{r['arm']}, seed {r['seed']}: held-out {held}\n  GRPO training (sampled): {train}")
    return "\n".join(lines)


@dataclass
class ToolUseOptions(Options):
    """`zoo.tools.repro.common.Options` of this claim: three seeds, 32 held-out items, one thread.

    Args:
        probe_every: GRPO steps between held-out evaluations (SFT: ``SFT_RATIO`` times as many); 0:
            before and after only.
    """

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    val_size: int = 32
    threads: int = 1
    probe_every: int = 10


OPTIONS = ToolUseOptions(steps=STEPS)


def main(options: ToolUseOptions) -> dict:
    """Run the claim with ``options`` (`zoo.tools.repro.repro`): every arm for every seed, or the
    rows of ``--merge`` files; print the table, the summary over seeds, the curves and the
    verdict."""
    rows = claim_rows(
        options,
        ARMS,
        lambda arm, seed: run_tool_arm(arm, seed, options.steps, options.probe_every, options.val_size),
    )
    held, note = verdict(rows)
    print(f"claim: {CLAIM}")
    print(table(rows))
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mean, sd, n = seed_stats(rows, arm, accuracy)
        cpu = statistics.median(r["cpu_s"] for r in rows if r["arm"] == arm) / 60
        print(f"| {arm} | {n} seeds | held-out accuracy {mean:.3f} ± {sd:.3f} | CPU min {cpu:.1f} |")
    print(curves(rows))
    print(verdict_line(held, note, rows, options.budget))
    result = {"claim": CLAIM, "held": held, "note": note, "budget": options.budget, "rows": rows}
    if options.json:
        Path(options.json).write_text(json.dumps(result, indent=2))
    return result
