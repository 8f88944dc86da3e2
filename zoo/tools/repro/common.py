"""The shared runner of the small-scale reproductions: one arm = one GRPO run of a tiny random-init
Qwen2.5-VL through the library itself (`datamodules.PretextDataModule`, a task,
`zoo.grpo.GRPOStrategy`, Lightning's Trainer), with greedy held-out evaluations before and after
training, and a plain-text table of the rows.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch
from lightning.pytorch import Callback, Trainer, seed_everything

from datamodules import PretextDataModule
from datamodules.sources.base import Source
from tasks import Task

MODEL = "tiny:qwen2_5_vl"
#: Training metrics kept per step (besides every ``train/reward/<task>/<part>``).
TRAIN_KEYS = (
    "train/reward",
    "train/grpo/frac_zero_std",
    "train/grpo/kl",
    "train/grpo/entropy",
    "train/dynamic/rounds",
    "train/dynamic/groups_drawn",
    "train/dynamic/groups_kept",
    "train/dynamic/cap_hit",
    "train/tools/calls",
    "train/tools/invalid",
)


@dataclass
class Arm:
    """One training run of a claim.

    Args:
        name: Row label.
        task: What GRPO trains on.
        source: Raw items; its last ``val_size`` items are held out (training never sees them).
        evals: Held-out sets, by name: each task is applied to the held-out items, greedy, one new
            token.
        lr: AdamW learning rate (betas 0.9, 0.99; no weight decay).
        beta: KL coefficient against the initial policy (k3).
        entropy_coef: Token-entropy bonus.
        prompts: Prompts per step (B); each is sampled G=8 times.
        settings: Extra columns for the JSON rows (what the task and images are).
        grpo: Further `zoo.grpo.GRPOStrategy` settings (e.g. ``refill_rounds``), also recorded in
            the row.
    """

    name: str
    task: Task
    source: Source
    evals: dict[str, Task]
    lr: float = 3e-4
    beta: float = 0.0
    entropy_coef: float = 0.0
    prompts: int = 8
    settings: dict = field(default_factory=dict)
    grpo: dict = field(default_factory=dict)


class Recorder(Callback):
    """Keeps each training step's metrics and the reward parts of every held-out completion; prints
    the mean reward and share of zero-variance groups of the last ``every`` steps."""

    def __init__(self, name: str, every: int = 50):
        self.name = name
        self.every = every
        self.steps: list[dict[str, float]] = []
        self.val: dict[str, list[float]] = defaultdict(list)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        metrics = outputs["metrics"]
        self.steps.append({k: v for k, v in metrics.items() if k in TRAIN_KEYS or k.startswith("train/reward/")})
        last = [s for s in self.steps[-self.every :] if "train/reward" in s]  # SFT steps have no reward
        if len(self.steps) % self.every == 0 and last:
            reward = sum(s["train/reward"] for s in last) / len(last)
            zero = sum(s["train/grpo/frac_zero_std"] for s in last) / len(last)
            print(
                f"[repro] {self.name} step {len(self.steps)}: reward {reward:.3f}, zero-variance groups {zero:.2f}",
                flush=True,
            )

    def on_validation_batch_end(self, trainer, module, outputs, batch, batch_idx, dataloader_idx=0):
        for reward in outputs["rewards"]:
            for part, value in reward.parts.items():
                self.val[part].append(value)


def window(steps: list[dict], key: str, first: bool) -> float | None:
    """Mean of ``key`` over the first (or last) tenth of the steps, 10 to 50 steps."""
    n = min(50, max(10, len(steps) // 10))
    values = [s[key] for s in (steps[:n] if first else steps[-n:]) if key in s]
    return sum(values) / len(values) if values else None


def evaluate(trainer: Trainer, policy, recorder: Recorder, arm: Arm, seed: int, val_size: int) -> dict:
    """Mean reward parts of greedy completions on each of ``arm.evals`` (the same held-out items for
    all)."""
    out = {}
    for name, task in arm.evals.items():
        recorder.val.clear()
        data = PretextDataModule(arm.source, task, batch_size=8, val_size=val_size, seed=seed)
        trainer.validate(policy, datamodule=data, verbose=False)
        out[name] = {part: sum(v) / len(v) for part, v in recorder.val.items()}
    return out


def run_arm(arm: Arm, seed: int, steps: int, val_size: int = 64, group: int = 8) -> dict:
    """Train ``arm`` for ``steps`` GRPO steps (B=``arm.prompts`` x G=``group``, one new token) from
    the tiny checkpoint; return its row: settings, training windows, held-out scores before and
    after, wall time."""
    from zoo import GRPOStrategy, QwenVLPolicy

    seed_everything(seed, verbose=False)
    start = time.perf_counter()
    cpu = time.process_time()
    lr = arm.lr
    policy = QwenVLPolicy(
        MODEL, optimizer=lambda params: torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    )
    data = PretextDataModule(arm.source, arm.task, batch_size=arm.prompts, val_size=val_size, seed=seed)
    recorder = Recorder(arm.name)
    strategy = GRPOStrategy(
        num_generations=group, max_new_tokens=1, beta=arm.beta, entropy_coef=arm.entropy_coef, **arm.grpo
    )
    trainer = Trainer(
        max_steps=steps,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[recorder],
        num_sanity_val_steps=0,
        check_val_every_n_epoch=None,
        val_check_interval=steps + 1,
    )
    before = evaluate(trainer, policy, recorder, arm, seed, val_size)
    fit = time.perf_counter()
    if steps:
        trainer.fit(policy, data)
    fit = time.perf_counter() - fit
    after = evaluate(trainer, policy, recorder, arm, seed, val_size) if steps else before
    train = {}
    for key in sorted({k for s in recorder.steps for k in s}):
        short = key.replace("train/reward/", "").replace("train/grpo/", "").replace("train/", "")
        train[short] = [window(recorder.steps, key, True), window(recorder.steps, key, False)]
    return {
        "arm": arm.name,
        "seed": seed,
        "steps": steps,
        "lr": arm.lr,
        "beta": arm.beta,
        "entropy_coef": arm.entropy_coef,
        "B": arm.prompts,
        "G": group,
        **arm.settings,
        **arm.grpo,
        "train": train,
        "before": before,
        "after": after,
        "fit_s": fit,
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
    }


def _pair(values, digits: int = 2) -> str:
    first, last = values
    fmt = lambda v: "-" if v is None else f"{v:.{digits}f}"  # noqa: E731
    return f"{fmt(first)} -> {fmt(last)}"


def table(rows: list[dict], train_keys: list[str], eval_parts: list[tuple[str, str]]) -> str:
    """A Markdown table: arm, seed, steps, training ``train_keys`` (first -> last window), held-out
    ``(set, part)`` before -> after, wall and CPU seconds (all threads)."""
    head = [
        "arm",
        "seed",
        "steps",
        *[f"train {k}" for k in train_keys],
        *[f"held-out {s} {p}" for s, p in eval_parts],
        "wall s",
        "CPU s",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["arm"], str(row["seed"]), str(row["steps"])]
        cells += [_pair(row["train"].get(k, (None, None))) for k in train_keys]
        cells += [_pair((row["before"][s].get(p), row["after"][s].get(p))) for s, p in eval_parts]
        cells += [f"{row['wall_s']:.0f}", f"{row['cpu_s']:.0f}" if "cpu_s" in row else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass
class Options:
    """How `run_claim` runs a claim: the arguments of ``zoo repro`` (`zoo.tools.repro.repro`)."""

    steps: int
    seeds: list[int] = field(default_factory=lambda: [0])
    arms: list[str] | None = None
    val_size: int = 64
    json: str | None = None
    merge: list[str] | None = None
    threads: int = 2
    #: The steps the claim declares (its ``steps`` default): fewer decide nothing (`verdict_line`).
    budget: int | None = None

    def __post_init__(self):
        self.budget = self.steps if self.budget is None else self.budget


def verdict_line(held: bool | None, note: str, rows: list[dict], budget: int) -> str:
    """The verdict: ``inconclusive`` when an arm ran fewer steps than the claim declares (a few
    steps decide nothing either way), else held / did not hold / not decided."""
    ran = min((row["steps"] for row in rows), default=budget)
    if ran < budget:
        return f"verdict: inconclusive (ran {ran} of the {budget} steps the claim declares): {note}"
    return f"verdict: {'not decided' if held is None else 'held' if held else 'did not hold'} at this scale: {note}"


def paired(rows: list[dict], first: str, second: str) -> list[tuple[int, dict, dict]]:
    """``(seed, row of first, row of second)`` for every seed that ran both arms, by seed."""
    by = {(r["arm"], r["seed"]): r for r in rows}
    seeds = sorted({s for _, s in by if (first, s) in by and (second, s) in by})
    return [(s, by[first, s], by[second, s]) for s in seeds]


def chosen_arms(arms: list, names: list[str] | None) -> list:
    """The arms named in ``names`` (None: all); a name no arm has is a ValueError, not an empty
    run."""
    unknown = sorted(set(names or ()) - {arm.name for arm in arms})
    if unknown:
        raise ValueError(
            f"no arm named {unknown} in this claim; its arms: {[arm.name for arm in arms]} (a name "
            "with a comma needs JSON: --arms '[\"a, b\"]')"
        )
    return [arm for arm in arms if not names or arm.name in names]


def claim_rows(options, arms: list, run) -> list[dict]:
    """The rows of a claim: ``run(arm, seed)`` for every seed and chosen arm (``--arms``), or the
    rows of the ``--merge`` files; torch gets ``--threads`` threads first."""
    torch.set_num_threads(options.threads)
    if options.merge:
        return [row for path in options.merge for row in json.loads(Path(path).read_text())["rows"]]
    return [run(arm, seed) for seed in options.seeds for arm in chosen_arms(arms, options.arms)]


def run_claim(
    args: Options, arms: list[Arm], claim: str, verdict, train_keys: list[str], eval_parts: list[tuple[str, str]]
) -> dict:
    """Run every arm for every seed (or read ``--merge`` files), print the claim, the table and the
    verdict (``held`` is None when the rows cannot decide it); write ``--json``."""
    rows = claim_rows(args, arms, lambda arm, seed: run_arm(arm, seed, args.steps, args.val_size))
    held, note = verdict(rows)
    print(f"claim: {claim}")
    print(table(rows, train_keys, eval_parts))
    print(verdict_line(held, note, rows, args.budget))
    result = {"claim": claim, "held": held, "note": note, "budget": args.budget, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result
