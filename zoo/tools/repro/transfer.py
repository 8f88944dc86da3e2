"""The runner of the transfer claims: one arm = the pretrained perception base
(`zoo.tools.perception_base`) trained in stages through the library (GRPO stages:
`datamodules.PretextDataModule` + a pretext task + `zoo.grpo.GRPOStrategy`; SFT stages: the base
corpus or a pretext task's demonstrations + `zoo.sft.SFTStrategy`; Lightning's Trainer), with the
held-out downstream benchmarks (`zoo.tools.repro.downstream`) recorded before, during and after, and
optional held-out pretext sets. Also the seed statistics, the table and the plot the claims
print."""

from __future__ import annotations

import statistics
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import torch
from lightning.pytorch import Trainer, seed_everything

from datamodules import PretextDataModule
from datamodules.sources.base import Source
from tasks import Task
from zoo.tools import perception_base
from zoo.tools.repro.common import Options, Recorder, claim_rows, verdict_line, window
from zoo.tools.repro.downstream import DownstreamProbe, downstream_scores

BASE = "tiny:qwen2_5_vl_perception"
GROUP = 8  # G: samples per prompt in GRPO stages
SFT_BATCH = 16


@dataclass
class Stage:
    """One training stage of an arm.

    Args:
        method: ``grpo`` on ``task`` (B=``prompts`` x G=8, one new token), or ``sft`` on the
            demonstrations of ``task`` (``None``: the base's own perception corpus, the
            continued-SFT control).
        steps: Optimizer steps, as a multiple of the claim's ``--steps``: an SFT stage given
            ``prompts * G / 16`` times a GRPO stage's steps trains on as many sequences (the
            equal-compute control).
        task: The pretext task (``None`` only for the corpus).
        source: Its raw items (one per modality for a mix); its last items are held out.
        lr: AdamW learning rate (betas 0.9, 0.99, no weight decay, clip 1.0).
        entropy_coef: Token-entropy bonus of a GRPO stage.
        beta: KL penalty of a GRPO stage towards the policy it starts from (0: none).
        prompts: Prompts per GRPO step.
    """

    method: Literal["grpo", "sft"]
    steps: float = 1.0
    task: Task | list[Task] | None = None
    source: Source | list[Source] | None = None
    lr: float = 3e-4
    entropy_coef: float = 0.0
    beta: float = 0.0
    prompts: int = 8


@dataclass
class TransferArm:
    """An arm of a transfer claim: stages run in order from ``pretrained`` (none: the base as it
    is).

    Args:
        name: Row label.
        stages: What it trains on.
        evals: Held-out pretext sets, by name: ``(task, source)``, greedy, on the source's last
            items.
        pretrained: Where it starts.
    """

    name: str
    stages: list[Stage] = field(default_factory=list)
    evals: dict[str, tuple[Task, Source]] = field(default_factory=dict)
    pretrained: str = BASE


def pretext_scores(policy, evals: dict[str, tuple[Task, Source]], size: int, seed: int) -> dict[str, dict]:
    """Mean reward parts of greedy one-letter completions on the last ``size`` items of each eval
    source, and ``majority``: the share of the commonest completion (1.0 when the policy gives one
    answer to every item)."""
    out = {}
    for name, (task, source) in evals.items():
        data = PretextDataModule(source, task, batch_size=16, val_size=size, seed=seed)
        data.setup("validate")
        parts: dict[str, list[float]] = {}
        texts: list[str] = []
        for batch in data.val_dataloader():
            rollout = policy.sample(batch, 1, max_new_tokens=1, greedy=True)
            texts += rollout.completions
            for example, text in zip(batch, rollout.completions, strict=True):
                for part, value in task.verify(example, text).parts.items():
                    parts.setdefault(part, []).append(value)
        out[name] = {part: sum(v) / len(v) for part, v in parts.items()}
        out[name]["majority"] = Counter(texts).most_common(1)[0][1] / len(texts)
    return out


def _trainer(stage: Stage, steps: int, callbacks: list) -> Trainer:
    from zoo import GRPOStrategy
    from zoo.sft import SFTStrategy

    strategy = (
        GRPOStrategy(num_generations=GROUP, max_new_tokens=1, entropy_coef=stage.entropy_coef, beta=stage.beta)
        if stage.method == "grpo"
        else SFTStrategy(max_new_tokens=1)
    )
    return Trainer(
        max_steps=steps,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )


def _data(stage: Stage, seed: int) -> PretextDataModule:
    from zoo.tools.repro.downstream import corpus, question_task

    if stage.task is None:
        return PretextDataModule(corpus(seed=seed), question_task(), batch_size=SFT_BATCH, val_size=0, seed=seed)
    batch = stage.prompts if stage.method == "grpo" else SFT_BATCH
    return PretextDataModule(stage.source, stage.task, batch_size=batch, val_size=64, seed=seed)


def run_stage(policy, stage: Stage, steps: int, seed: int, probe: DownstreamProbe, recorder: Recorder) -> None:
    """Train ``policy`` for ``steps`` steps of ``stage`` (AdamW with fresh moments)."""
    lr = stage.lr
    policy.optimizer_factory = lambda params: torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    _trainer(stage, steps, [probe, recorder]).fit(policy, _data(stage, seed))


def run_transfer_arm(arm: TransferArm, seed: int, steps: int, probe_every: int, size: int = 64) -> dict:
    """Run ``arm`` (``steps`` = the claim's step unit) for one seed; its row: downstream and pretext
    scores before and after, the downstream curve, training windows, wall and CPU seconds."""
    from zoo import QwenVLPolicy

    # the tool builds the base it starts from when it is missing (a policy's loading never trains)
    pretrained = perception_base.resolve() if arm.pretrained == BASE else arm.pretrained
    seed_everything(seed, verbose=False)
    start = time.perf_counter()
    cpu = time.process_time()
    policy = QwenVLPolicy(pretrained)
    policy.configure_model()
    before = {"downstream": downstream_scores(policy, size), **pretext_scores(policy, arm.evals, size, seed)}
    curve = [(0, before["downstream"])]
    done = 0
    recorder = Recorder(arm.name)
    for stage in arm.stages:
        probe = DownstreamProbe(max(1, round(probe_every * stage.steps)) if probe_every else 0, size)
        probe.curve.append((0, curve[-1][1]))  # already measured
        run_stage(policy, stage, max(1, round(stage.steps * steps)), seed, probe, recorder)
        curve += [(done + s, scores) for s, scores in probe.curve[1:]]
        done = curve[-1][0]
    after = (
        {"downstream": downstream_scores(policy, size), **pretext_scores(policy, arm.evals, size, seed)}
        if arm.stages
        else before
    )
    train = {}
    for key in sorted({k for s in recorder.steps for k in s}):
        short = key.replace("train/reward/", "").replace("train/grpo/", "").replace("train/", "")
        train[short] = [window(recorder.steps, key, True), window(recorder.steps, key, False)]
    return {
        "arm": arm.name,
        "seed": seed,
        "steps": done,
        "stages": [(s.method, s.steps) for s in arm.stages],
        "before": before,
        "after": after,
        "curve": curve,
        "train": train,
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
    }


def seed_stats(rows: list[dict], arm: str, key=lambda r: r["after"]["downstream"]["mean"]) -> tuple[float, float, int]:
    """``(mean, sample standard deviation, seeds)`` of ``key`` over the rows of ``arm`` (spread 0
    for one seed)."""
    values = [key(r) for r in rows if r["arm"] == arm]
    if not values:
        return float("nan"), float("nan"), 0
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values)


def summary_table(rows: list[dict], columns: list[tuple[str, object]]) -> str:
    """A Markdown table of each arm's ``mean ± sd`` over seeds for each ``(label, key)`` column,
    with the median CPU minutes of its seeds."""
    arms = list(dict.fromkeys(r["arm"] for r in rows))
    head = ["arm", "seeds", *[label for label, _ in columns], "CPU min (median)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in arms:
        cells = [arm, str(seed_stats(rows, arm)[2])]
        for _, key in columns:
            mean, sd, _ = seed_stats(rows, arm, key)
            cells.append(f"{mean:.3f} ± {sd:.3f}")
        cpu = statistics.median(r["cpu_s"] for r in rows if r["arm"] == arm) / 60
        lines.append("| " + " | ".join(cells + [f"{cpu:.1f}"]) + " |")
    return "\n".join(lines)


def plot_curves(rows: list[dict], path: str, title: str) -> None:
    """Held-out downstream mean accuracy against training steps, one line per arm (the mean over
    seeds at each recorded step, the band its min-max), written as a PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for arm in dict.fromkeys(r["arm"] for r in rows):
        curves = [dict((s, v["mean"]) for s, v in r["curve"]) for r in rows if r["arm"] == arm]
        steps = sorted(set.intersection(*(set(c) for c in curves)))
        values = [[c[s] for c in curves] for s in steps]
        ax.plot(steps, [statistics.fmean(v) for v in values], marker="o", label=arm)
        ax.fill_between(steps, [min(v) for v in values], [max(v) for v in values], alpha=0.15)
    ax.axhline(0.375, color="grey", linestyle=":", label="chance (0.375)")
    ax.set(xlabel="training steps of the arm", ylabel="held-out downstream accuracy (mean of 4 kinds)")
    ax.set_title(textwrap.fill(title, 70), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


@dataclass
class TransferOptions(Options):
    """`zoo.tools.repro.common.Options` of the transfer claims: three seeds, smaller held-out sets,
    one thread, and the downstream curve.

    Args:
        probe_every: Steps between downstream evaluations during training (the curve); 0: before and
            after only.
        plot: Also write the downstream accuracy curves to this PNG.
    """

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    val_size: int = 32
    threads: int = 1
    probe_every: int = 50
    plot: str | None = None


def run_transfer_claim(
    args: TransferOptions, arms: list[TransferArm], claim: str, verdict, columns: list[tuple[str, object]]
) -> dict:
    """Run every arm for every seed (or read ``--merge`` files), print the claim, the per-seed rows,
    the summary over seeds and the verdict; write ``--json`` and ``--plot``."""
    import json
    from pathlib import Path

    rows = claim_rows(
        args, arms, lambda arm, seed: run_transfer_arm(arm, seed, args.steps, args.probe_every, args.val_size)
    )
    held, note = verdict(rows)
    print(f"claim: {claim}")
    for r in rows:
        scores = ", ".join(f"{k} {v:.2f}" for k, v in r["after"]["downstream"].items())
        print(f"| {r['arm']} | seed {r['seed']} | {r['steps']} steps | {scores} | CPU {r['cpu_s']:.0f} s |")
    print(summary_table(rows, columns))
    print(verdict_line(held, note, rows, args.budget))
    result = {"claim": claim, "held": held, "note": note, "budget": args.budget, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.plot:
        plot_curves(rows, args.plot, claim)
    return result


def downstream(kind: str = "mean"):
    """A column key: the held-out downstream accuracy of ``kind`` after training."""
    return lambda r: r["after"]["downstream"][kind]
