"""Per-item difficulty: recent pass rates (`PassRates`), the sampling weights curricula derive from
them (`item_weights`), and `SelectedItems`, a source cut down to the items an offline selection kept
(``zoo select``, which writes the file it reads).

An item is one index of a source (``Example.meta[ITEM_KEY]``): its examples differ from epoch to
epoch (a new permutation, angle, option order), its content does not, so its difficulty carries
over.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from datamodules.sources.base import Source

MODES = ("dgrpo", "variance", "easy_to_hard")
#: Version of the file `SelectedItems` reads.
SELECTION_FORMAT = 1


class PassRates:
    """The recent pass rate of each training item, per modality: an exponential moving average of
    the mean score (the ``accuracy`` part, by default) of its examples' completions.

    Args:
        smoothing: Weight of a new observation: ``rate += smoothing * (observed - rate)`` (1 keeps
            only the latest); an item's first observation is its rate.
    """

    def __init__(self, smoothing: float = 0.5):
        if not 0 < smoothing <= 1:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        self.smoothing = smoothing
        self.rates: dict[str, dict[int, float]] = {}

    def update(self, observations: Iterable[tuple[str, int, float]]) -> None:
        """Fold in ``(modality, item, observed pass rate)`` triples, in order (an item may come
        twice)."""
        for modality, item, observed in observations:
            table = self.rates.setdefault(modality, {})
            old = table.get(item)
            table[item] = observed if old is None else old + self.smoothing * (observed - old)

    def array(self, modality: str, n: int, prior: float) -> np.ndarray:
        """Rates of items ``0..n-1`` of ``modality`` (``prior`` for those never seen), ``[n]``."""
        rates = np.full(n, prior, dtype=np.float64)
        for item, rate in self.rates.get(modality, {}).items():
            if 0 <= item < n:  # a negative index would set an item counted from the end
                rates[item] = rate
        return rates

    def state_dict(self) -> dict:
        return {"rates": {m: dict(table) for m, table in self.rates.items()}}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` wrote; ValueError in one line for anything else (a rate that is
        not a finite number, an item that is not a non-negative index, ...), left as it was."""
        tables = state.get("rates") if isinstance(state, dict) else None
        if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
            raise ValueError("pass rates: 'rates' must map each modality to {item: rate}")
        self.rates = {str(m): {_item(i, m): _rate(r, m, i) for i, r in table.items()} for m, table in tables.items()}


def _item(value: object, modality: object) -> int:
    """An item index of saved state (an int, or its decimal string); ValueError otherwise."""
    index = int(value) if isinstance(value, str) and value.isdecimal() else value
    if isinstance(index, bool) or not isinstance(index, numbers.Integral) or index < 0:
        raise ValueError(f"pass rates: item {str(value)[:40]!r} of {str(modality)[:40]!r} is not a non-negative index")
    return int(index)


def _rate(value: object, modality: object, item: object) -> float:
    """A saved pass rate: a finite number; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(
            f"pass rates: the rate of item {str(item)[:40]} of {str(modality)[:40]!r} "
            f"is {str(value)[:40]}, not a finite number"
        )
    return float(value)


def weights(rates: np.ndarray, mode: str, progress: float = 0.0) -> np.ndarray:
    """Sampling weight in [0, 1] of items with pass rates ``rates`` (``[n]``):

    - ``dgrpo``: ``(1 + d) / 2`` with difficulty ``d = 1 - p``, i.e. ``1 - p / 2``: the advantage
      scale of DGRPO (VITAL, arXiv 2508.04416, as a public reimplementation writes it: ``d =
      clamp(max reward - group mean, 0, 1)``), applied as a sampling probability instead, which
      gives the same expected gradient;
    - ``variance``: ``4 p (1 - p)``: the Bernoulli reward variance, highest for items solved half
      the time (variance-aware selection; GRPO learns nothing from groups that all pass or all
      fail);
    - ``easy_to_hard``: ``p^(1 - t) (1 - p)^t`` at training progress ``t`` in [0, 1]: easy items
      first, hard ones last (SARI's easy-to-hard curriculum, arXiv 2504.15900, by online pass rates:
      SARI's own schedule is unpublished).
    """
    p = np.clip(rates, 0.0, 1.0)
    if mode == "dgrpo":
        return 1.0 - p / 2
    if mode == "variance":
        return 4.0 * p * (1.0 - p)
    if mode == "easy_to_hard":
        t = min(max(progress, 0.0), 1.0)
        return p ** (1.0 - t) * (1.0 - p) ** t
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


class SelectedItems(Source):
    """The items of ``source`` that an offline selection kept (``zoo select`` writes the file):
    training examples then come only from them. The file also lists the items the scoring run held
    out; read them with ``part: held_out`` as the ``val_source``, so validation stays on items never
    trained on.

    Args:
        source: The source the selection scored (same class and length, or a ValueError).
        path: The JSON file ``zoo select`` wrote.
        part: ``kept`` (the selected training items) or ``held_out`` (the scoring run's validation
            items).
    """

    modality = "any"  # that of ``source``, set per instance

    def __init__(self, source: Source, path: str, part: Literal["kept", "held_out"] = "kept"):
        if part not in ("kept", "held_out"):
            raise ValueError(f"part must be 'kept' or 'held_out', got {part!r}")
        entry = read_selection(path, source)
        self.source = source
        self.path = path
        self.part = part
        self.modality = source.modality
        self.indices = [int(i) for i in entry[part]]
        if not self.indices:
            raise ValueError(f"{path}: the selection keeps no {part} items of {type(source).__name__}")

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> Any:
        return self.source[self.indices[index]]

    def describe(self, index: int) -> str:
        return self.source.describe(self.indices[index])


def read_selection(path: str, source: Source) -> dict:
    """The entry of ``source``'s modality in a selection file, checked against ``source``:
    ValueError in one line naming the file and what is wrong (not JSON, not an object where one is
    needed, an index that is no item of ``source``, an item listed twice, or kept and held out at
    once)."""
    file = Path(path).expanduser()
    where = repr(str(file))
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError, RecursionError) as err:  # nesting past the parser's stack recurses
        raise ValueError(f"cannot read the selection file {where}: {type(err).__name__}: {str(err)[:200]}") from None
    if not isinstance(data, dict) or data.get("format") != SELECTION_FORMAT:
        raise ValueError(f"{where} is not a selection file of format {SELECTION_FORMAT} (zoo select)")
    modalities = data.get("modalities")
    if not isinstance(modalities, dict):
        raise ValueError(f"{where}: 'modalities' must map each modality to its selection")
    entry = modalities.get(source.modality)
    if entry is None:
        raise ValueError(f"{where} holds no selection of {source.modality} items")
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: the selection of {source.modality} items must be an object")
    expected = (entry.get("source"), entry.get("length"))
    if expected != (type(source).__name__, len(source)):
        raise ValueError(
            f"{where} was written for {str(expected[0])[:80]} with "
            f"{str(expected[1])[:20]} items, not {type(source).__name__} with "
            f"{len(source)}"
        )
    for part in ("kept", "held_out"):
        _check_items(entry.get(part), part, len(source), where)
    both = sorted(set(entry["kept"]) & set(entry["held_out"]))
    if both:
        raise ValueError(
            f"{where}: items {both[:10]} are both kept and held out, so held-out "
            "items would be trained on; run zoo select again"
        )
    return entry


def _check_items(items: object, part: str, n: int, where: str) -> None:
    """ValueError unless ``items`` is a list of distinct item indices in ``0..n-1``."""
    if not isinstance(items, list) or not all(type(i) is int for i in items):  # True is no index
        raise ValueError(f"{where}: {part!r} must be a list of item indices (integers)")
    if not all(0 <= i < n for i in items):
        raise ValueError(f"{where} lists item indices outside 0..{n - 1} in {part!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"{where}: {part!r} lists an item more than once")
