"""Small-scale reproductions of paper claims on a CPU with tiny models: ``zoo repro <claim>`` (see
docs/reproductions.md). Each claim is a module with ``OPTIONS`` (its defaults: `common.Options`, or
`transfer.TransferOptions` for the claims run from the perception base) and ``main(options)`` that
trains its arms through the library, prints a table and says whether the claim held."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Literal, get_args

Claim = Literal[
    "graded_reward",
    "grid_transfer",
    "kl_penalty",
    "pretext_transfer",
    "base_graded",
    "base_grid",
    "cold_start",
    "dynamic_sampling",
    "tool_use",
]
CLAIMS = get_args(Claim)


def repro(
    claim: Claim,
    steps: int | None = None,
    seeds: list[int] | None = None,
    arms: list[str] | None = None,
    val_size: int | None = None,
    json: str | None = None,
    merge: list[str] | None = None,
    threads: int | None = None,
    probe_every: int | None = None,
    plot: str | None = None,
) -> dict:
    """Check a paper's claim at toy scale on the CPU: train its arms with a tiny policy, say if it
    held.

    Args:
        claim: From a random-init model: ``graded_reward`` (graded permutation rewards learn where a
            binary one stalls), ``grid_transfer`` (one jigsaw grid size transfers to another),
            ``kl_penalty`` (no KL term vs 0.04). From the perception base: ``pretext_transfer``
            (pretext GRPO lifts downstream questions), ``base_graded``, ``base_grid``,
            ``cold_start`` (SFT on demonstrations before GRPO, or GRPO alone). From a random-init
            model again: ``dynamic_sampling`` (DAPO refill trains on more groups with unequal
            rewards); ``tool_use`` (a crop tool lets a tiny policy read what its first view cannot:
            SFT then GRPO with the tool vs without it).
        steps: GRPO steps per arm (None: the claim's full CPU budget, whose numbers
            docs/reproductions.md reports).
        seeds: Seeds, each a run of every arm (None: ``[0]``; ``[0, 1, 2]`` for the perception-base
            claims).
        arms: Run only these arms, by name (None: all).
        val_size: Held-out items per evaluation set (None: 64; 32 for the perception-base claims).
        json: Also write the rows and the verdict to this file.
        merge: Train nothing: print the table and verdict of the rows in these ``--json`` files
            (arms run apart).
        threads: torch CPU threads (None: 2; 1 for the perception-base claims, which waste less on a
            busy machine).
        probe_every: Perception-base claims and ``tool_use`` only: steps between held-out
            evaluations (the curve; None: the claim's; 0: before and after only).
        plot: Perception-base claims only: also write the downstream accuracy curves to this PNG.
    """
    module = importlib.import_module(f"zoo.tools.repro.{claim}")
    given = {
        name: value
        for name, value in dict(
            steps=steps,
            seeds=seeds,
            arms=arms,
            val_size=val_size,
            json=json,
            merge=merge,
            threads=threads,
            probe_every=probe_every,
            plot=plot,
        ).items()
        if value is not None
    }
    unknown = sorted(set(given) - {f.name for f in dataclasses.fields(module.OPTIONS)})
    if unknown:
        raise ValueError(
            f"zoo repro {claim} takes no {', '.join(unknown)} (the perception-base claims take plot and "
            "probe_every, tool_use probe_every)"
        )
    return module.main(dataclasses.replace(module.OPTIONS, **given))
