"""Small-scale reproductions of paper claims on a CPU with tiny models: ``zoo repro <claim>`` (see
docs/reproductions.md). Each claim is a module with ``STEPS`` and ``main(options)`` that trains its arms through
the library, prints a table and says whether the claim held."""

from __future__ import annotations

import importlib
from typing import Literal, get_args

from zoo.repro.common import Options

Claim = Literal["graded_reward", "grid_transfer", "kl_penalty"]
CLAIMS = get_args(Claim)


def repro(claim: Claim, steps: int | None = None, seeds: list[int] | None = None, arms: list[str] | None = None,
          val_size: int = 64, json: str | None = None, merge: list[str] | None = None, threads: int = 2) -> dict:
    """Check a paper's claim at toy scale on the CPU: train its arms with a tiny random-init policy, say if it held.

    Args:
        claim: ``graded_reward`` (graded permutation rewards learn where a binary one stalls),
            ``grid_transfer`` (one jigsaw grid size transfers to another) or ``kl_penalty`` (no KL term vs 0.04).
        steps: GRPO steps per arm (None: the claim's full CPU budget, whose numbers docs/reproductions.md reports).
        seeds: Seeds, each a run of every arm (None: ``[0]``).
        arms: Run only these arms, by name (None: all).
        val_size: Held-out items per evaluation set.
        json: Also write the rows and the verdict to this file.
        merge: Train nothing: print the table and verdict of the rows in these ``--json`` files (arms run apart).
        threads: torch CPU threads (1 wastes less on a busy machine).
    """
    module = importlib.import_module(f"zoo.repro.{claim}")
    options = Options(steps=module.STEPS if steps is None else steps, seeds=[0] if seeds is None else seeds,
                      arms=arms, val_size=val_size, json=json, merge=merge, threads=threads)
    return module.main(options)
