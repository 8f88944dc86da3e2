"""``zoo select``: offline, variance-aware data selection. A policy (the configuration's base model)
samples n completions for every training item; an item's pass rate is the mean ``accuracy`` of its
completions, and the items whose pass rate lies strictly between ``--lo`` and ``--hi`` (default:
neither always nor never solved, the only ones a GRPO group learns from), or the ``--top`` share
with the highest variance ``p (1 - p)``, are written to a file `datamodules.SelectedItems` reads
back as a source."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from datamodules.difficulty import SELECTION_FORMAT
from datamodules.streams import ITEM_KEY

Sampler = Callable[[list], list[list[str]]]  # a batch of examples -> the completions of each


def score_items(datamodule, sample: Sampler, part: str = "accuracy", passes: int = 1) -> dict[str, dict[int, float]]:
    """Per modality and item, the mean ``part`` reward (against the answer) of the completions
    ``sample`` gives the item's training examples over ``passes`` passes of the training data."""
    sums: dict[tuple[str, int], list[float]] = {}
    for _ in range(passes):
        for batch in datamodule.train_dataloader():
            for example, group in zip(batch, sample(batch), strict=True):
                key = (datamodule.tasks[example.task].modality, int(example.meta[ITEM_KEY]))
                entry = sums.setdefault(key, [0.0, 0.0])
                entry[0] += sum(datamodule.verify(example, text).parts.get(part, 0.0) for text in group)
                entry[1] += len(group)
    rates: dict[str, dict[int, float]] = {}
    for (modality, item), (total, count) in sorted(sums.items()):
        rates.setdefault(modality, {})[item] = total / count
    return rates


def kept(rates: dict[int, float], lo: float = 0.0, hi: float = 1.0, top: float | None = None) -> list[int]:
    """The items to keep: pass rate in ``(lo, hi)``, or (with ``top``) that share of the scored
    items with the highest ``p (1 - p)`` (ties: lower index first)."""
    if top is None:
        return sorted(i for i, p in rates.items() if lo < p < hi)
    ranked = sorted(rates, key=lambda i: (-rates[i] * (1 - rates[i]), i))
    return sorted(ranked[: max(1, round(top * len(ranked)))])


def selection(datamodule, rates: dict[str, dict[int, float]], settings: dict, **rule) -> dict:
    """The file `datamodules.SelectedItems` reads: for each modality, its source's class and length,
    the kept training items, the held-out items of the scoring run and every pass rate."""
    out = {"format": SELECTION_FORMAT, "settings": settings, "modalities": {}}
    sources = datamodule.source if isinstance(datamodule.source, list) else [datamodule.source]
    by_modality = {source.modality: source for source in sources}
    for modality, (_, held_out) in datamodule.item_splits().items():
        scored = rates.get(modality, {})
        out["modalities"][modality] = {
            "source": type(by_modality[modality]).__name__,
            "length": len(by_modality[modality]),
            "kept": kept(scored, **rule),
            "held_out": held_out,
            "pass_rates": {str(i): p for i, p in sorted(scored.items())},
        }
    return out


def policy_sampler(module, n: int, max_new_tokens: int, temperature: float, top_p: float, seed: int) -> Sampler:
    """``n`` seeded completions per example from ``module`` (the same for the same examples and
    seed)."""

    def sample(batch: list) -> list[list[str]]:
        rollout = module.sample(
            batch, n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed
        )
        return [rollout.completions[b * n : (b + 1) * n] for b in range(len(batch))]

    return sample


def _check(n: int, passes: int, lo: float, hi: float, top: float | None) -> None:
    if n < 1 or passes < 1:
        raise SystemExit("[zoo] select: --n and --passes must be >= 1")
    if not 0 <= lo < hi <= 1 or (top is not None and not 0 < top <= 1):
        raise SystemExit("[zoo] select: need 0 <= --lo < --hi <= 1 and --top in (0, 1]")


def select(
    fit_args: list[str] | None = None,
    n: int = 8,
    out: str = "selection.json",
    lo: float = 0.0,
    hi: float = 1.0,
    top: float | None = None,
    part: str = "accuracy",
    passes: int = 1,
    seed: int = 0,
    device: str | None = None,
) -> None:
    """Score every training item by its base policy's pass rate over n samples; keep those worth
    training on.

    The configuration's model and data sections are built (sampling settings default to the
    strategy's); the items neither always nor never solved are written to a file that
    `datamodules.SelectedItems` reads back (``part: kept`` as the source, ``part: held_out`` as the
    val_source).

    Args:
        fit_args: Every other argument, read as by ``zoo fit``: ``--config`` (repeatable) and dotted
            overrides.
        n: Completions per example.
        out: The file to write.
        lo: Keep pass rates above this.
        hi: Keep pass rates below this.
        top: Instead keep this share of the items, highest p(1-p) first.
        part: The reward part averaged into a pass rate.
        passes: Passes over the training items.
        seed: The sampling seed.
        device: Where the policy samples (None: cuda when available, else cpu).
    """
    from zoo.tools.preview import parse_config

    _check(n, passes, lo, hi, top)
    config = parse_config(list(fit_args or []))
    datamodule, module, grpo = _build(config, device or ("cuda" if torch.cuda.is_available() else "cpu"))
    sample = policy_sampler(
        module, n, grpo.get("max_new_tokens", 256), grpo.get("temperature", 1.0), grpo.get("top_p", 1.0), seed
    )
    rates = score_items(datamodule, sample, part, passes)
    settings = {
        "n": n,
        "part": part,
        "passes": passes,
        "seed": seed,
        "model": str(config.model.init_args.get("pretrained", "")),
        **{k: grpo.get(k) for k in ("max_new_tokens", "temperature", "top_p")},
    }
    result = selection(datamodule, rates, settings, lo=lo, hi=hi, top=top)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")
    for modality, entry in result["modalities"].items():
        print(
            f"[zoo] select: {modality}: kept {len(entry['kept'])} of {len(entry['pass_rates'])} scored items "
            f"({datamodule.training_items[modality]} training items) -> {out}"
        )


def _build(config, device: str) -> tuple:
    """The data module (one pass over every training item), the policy on ``device`` and the
    strategy's settings of a parsed configuration."""
    from lightning import LightningDataModule

    from zoo.policy import PolicyModule
    from zoo.tools.preview import build_section

    datamodule = build_section(config, "data", LightningDataModule, "select")
    if not hasattr(datamodule, "item_splits"):
        raise SystemExit(f"[zoo] select: needs a datamodules.PretextDataModule, got {type(datamodule).__name__}")
    init = config.trainer.strategy.get("init_args") or {}
    grpo = init.as_dict() if hasattr(init, "as_dict") else dict(init)
    module = build_section(config, "model", PolicyModule, "select")
    module.configure_model()
    module.to(device)
    datamodule.epoch_size = sum(datamodule.training_items.values())  # one pass: every item of a single source once
    return datamodule, module, grpo
