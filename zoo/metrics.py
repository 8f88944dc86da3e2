"""Weighted means that stay correct across ranks whose batches hold different tasks."""

from __future__ import annotations

from collections import defaultdict

import torch.distributed as dist


class MetricMeans:
    """Accumulates ``sum`` and ``count`` per metric name; `result` averages over every rank's
    data."""

    def __init__(self):
        self.sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])

    def add(self, name: str, value: float, count: float = 1.0) -> None:
        """Add ``count`` observations whose mean is ``value``."""
        entry = self.sums[name]
        entry[0] += float(value) * count
        entry[1] += count

    def add_rewards(self, prefix: str, tasks: list[str], rewards: list) -> None:
        """``<prefix>/reward`` (mean total) and ``<prefix>/reward/<task>/<part>`` for each
        completion."""
        for task, reward in zip(tasks, rewards, strict=True):
            self.add(f"{prefix}/reward", reward.total)
            for part, value in reward.parts.items():
                self.add(f"{prefix}/reward/{task}/{part}", value)

    def result(self) -> dict[str, float]:
        """Means over all ranks (a collective call when distributed: every rank must call it)."""
        merged = defaultdict(lambda: [0.0, 0.0])
        for part in gather_objects(dict(self.sums)):  # names may differ between ranks
            for name, (total, count) in part.items():
                merged[name][0] += total
                merged[name][1] += count
        return {name: total / count for name, (total, count) in sorted(merged.items()) if count > 0}


def gather_objects(obj) -> list:
    """``obj`` of every rank, in rank order (``[obj]`` when not distributed; a collective call when
    it is: every rank must call it)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, obj)
        return everyone
    return [obj]
