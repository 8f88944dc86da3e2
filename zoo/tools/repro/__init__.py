"""Small-scale reproductions of paper claims on a CPU with tiny models: ``zoo repro <claim> [--steps N]
[--seeds 0 1] [--json out.json]`` (see docs/reproductions.md). Each claim is a module with ``main(argv)``
that trains its arms through the library, prints a table and says whether the claim held."""

from __future__ import annotations

import importlib
import sys

CLAIMS = ("graded_reward", "grid_transfer", "kl_penalty", "pretext_transfer", "base_graded", "base_grid",
          "cold_start", "dynamic_sampling")


def main(argv: list[str]) -> dict:
    """Run the claim named by ``argv[0]`` with the remaining arguments."""
    if not argv or argv[0] not in CLAIMS:
        print(f"usage: zoo repro {{{','.join(CLAIMS)}}} [--steps N] [--seeds S ...] [--json FILE]", file=sys.stderr)
        raise SystemExit(2)
    return importlib.import_module(f"zoo.tools.repro.{argv[0]}").main(argv[1:])
