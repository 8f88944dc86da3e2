"""``zoo select``: offline, variance-aware data selection. A policy (the configuration's base model) samples n
completions for every training item; an item's pass rate is the mean ``accuracy`` of its completions, and the
items whose pass rate lies strictly between ``--lo`` and ``--hi`` (default: neither always nor never solved,
the only ones a GRPO group learns from), or the ``--top`` share with the highest variance ``p (1 - p)``, are
written to a file `datamodules.SelectedItems` reads back as a source."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import torch

from datamodules.difficulty import SELECTION_FORMAT
from datamodules.streams import ITEM_KEY

Sampler = Callable[[list], list[list[str]]]  # a batch of examples -> the completions of each


def score_items(datamodule, sample: Sampler, part: str = "accuracy", passes: int = 1) -> dict[str, dict[int, float]]:
    """Per modality and item, the mean ``part`` reward (against the answer) of the completions ``sample`` gives
    the item's training examples over ``passes`` passes of the training data."""
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
    """The items to keep: pass rate in ``(lo, hi)``, or (with ``top``) that share of the scored items with the
    highest ``p (1 - p)`` (ties: lower index first)."""
    if top is None:
        return sorted(i for i, p in rates.items() if lo < p < hi)
    ranked = sorted(rates, key=lambda i: (-rates[i] * (1 - rates[i]), i))
    return sorted(ranked[:max(1, round(top * len(ranked)))])


def selection(datamodule, rates: dict[str, dict[int, float]], settings: dict, **rule) -> dict:
    """The file `datamodules.SelectedItems` reads: for each modality, its source's class and length, the kept
    training items, the held-out items of the scoring run and every pass rate."""
    out = {"format": SELECTION_FORMAT, "settings": settings, "modalities": {}}
    sources = datamodule.source if isinstance(datamodule.source, list) else [datamodule.source]
    by_modality = {source.modality: source for source in sources}
    for modality, (_, held_out) in datamodule.item_splits().items():
        scored = rates.get(modality, {})
        out["modalities"][modality] = {
            "source": type(by_modality[modality]).__name__, "length": len(by_modality[modality]),
            "kept": kept(scored, **rule), "held_out": held_out,
            "pass_rates": {str(i): p for i, p in sorted(scored.items())}}
    return out


def policy_sampler(module, n: int, max_new_tokens: int, temperature: float, top_p: float, seed: int) -> Sampler:
    """``n`` seeded completions per example from ``module`` (the same for the same examples and seed)."""
    def sample(batch: list) -> list[list[str]]:
        rollout = module.sample(batch, n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                seed=seed)
        return [rollout.completions[b * n:(b + 1) * n] for b in range(len(batch))]
    return sample


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zoo select", description=main.__doc__, allow_abbrev=False,
        usage="zoo select --config CONFIG [--config ...] [overrides] [--n N] [--out OUT] [--lo LO] [--hi HI] "
              "[--top TOP] [--part PART] [--passes PASSES] [--seed SEED] [--device DEVICE]",
        epilog="Every other argument is read as by `zoo fit` (--config, dotted overrides); the model and data "
               "sections are built, sampling settings default to the strategy's. Read the file back with "
               "datamodules.SelectedItems (part: kept as source, part: held_out as val_source).")
    parser.add_argument("--n", type=int, default=8, help="completions per example (default 8)")
    parser.add_argument("--out", default="selection.json", help="file to write (default selection.json)")
    parser.add_argument("--lo", type=float, default=0.0, help="keep pass rates above this (default 0)")
    parser.add_argument("--hi", type=float, default=1.0, help="keep pass rates below this (default 1)")
    parser.add_argument("--top", type=float, help="instead keep this share of the items, highest p(1-p) first")
    parser.add_argument("--part", default="accuracy", help="reward part averaged into a pass rate")
    parser.add_argument("--passes", type=int, default=1, help="passes over the training items (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return parser


def _check(options) -> None:
    if options.n < 1 or options.passes < 1:
        raise SystemExit("[zoo] select: --n and --passes must be >= 1")
    if not 0 <= options.lo < options.hi <= 1 or (options.top is not None and not 0 < options.top <= 1):
        raise SystemExit("[zoo] select: need 0 <= --lo < --hi <= 1 and --top in (0, 1]")


def main(args: list[str]) -> None:
    """``zoo select``: score every training item of a configuration by its base policy's pass rate over n
    sampled completions, and write the items worth training on (neither always nor never solved)."""
    from lightning import LightningDataModule

    from zoo.policy import PolicyModule
    from zoo.tools.preview import build_section, parse_config

    options, rest = _parser().parse_known_args(args)
    _check(options)
    config = parse_config(rest)
    datamodule = build_section(config, "data", LightningDataModule, "select")
    if not hasattr(datamodule, "item_splits"):
        raise SystemExit(f"[zoo] select: needs a datamodules.PretextDataModule, got {type(datamodule).__name__}")
    init = config.trainer.strategy.get("init_args") or {}
    grpo = init.as_dict() if hasattr(init, "as_dict") else dict(init)
    module = build_section(config, "model", PolicyModule, "select")
    module.configure_model()
    module.to(options.device)
    datamodule.epoch_size = sum(datamodule.training_items.values())  # one pass: every item of a single source once
    sample = policy_sampler(module, options.n, grpo.get("max_new_tokens", 256), grpo.get("temperature", 1.0),
                            grpo.get("top_p", 1.0), options.seed)
    rates = score_items(datamodule, sample, options.part, options.passes)
    settings = {"n": options.n, "part": options.part, "passes": options.passes, "seed": options.seed,
                "model": str(config.model.init_args.get("pretrained", "")), **{k: grpo.get(k) for k in
                ("max_new_tokens", "temperature", "top_p")}}
    result = selection(datamodule, rates, settings, lo=options.lo, hi=options.hi, top=options.top)
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n")
    for modality, entry in result["modalities"].items():
        print(f"[zoo] select: {modality}: kept {len(entry['kept'])} of {len(entry['pass_rates'])} scored items "
              f"({datamodule.training_items[modality]} training items) -> {options.out}")
