"""torch's CPU threads for a ``zoo`` command on a shared machine: by default one per core that the
other jobs leave free, so a busy node slows a run in proportion to its load instead of torch's
threads spinning against the other jobs (docs/performance.md, "A shared machine").
``ZOO_THREADS=<n>`` sets the number."""

from __future__ import annotations

import os

import torch

#: The environment variable that sets the number of threads (a positive integer).
VARIABLE = "ZOO_THREADS"


def free_cores(cores: int, load: float) -> int:
    """The cores of ``cores`` that a 1-minute ``load`` leaves free, rounded, at least 1."""
    return max(1, min(cores, round(cores - load)))


def choose_threads() -> tuple[int, str]:
    """The thread count and why: ``ZOO_THREADS``, else the free cores of this process's CPU set
    (at most torch's default, one per physical core)."""
    given = os.environ.get(VARIABLE, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ValueError(f"{VARIABLE}={given!r}: give a positive number of torch threads")
        return int(given), f"{VARIABLE}={given}"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    threads = min(torch.get_num_threads(), free_cores(cores, load))
    return threads, f"load {load:.1f} on {cores} cores; {VARIABLE}=<n> sets it"


def set_threads() -> None:
    """Apply `choose_threads` to torch, with a ``[zoo]`` line when it is fewer than torch's
    default."""
    default = torch.get_num_threads()
    threads, why = choose_threads()
    if threads != default:
        torch.set_num_threads(threads)
        print(f"[zoo] {threads} torch thread(s), not {default} ({why})", flush=True)
