"""How `PretextDataModule` divides its sources: sources by modality, and the training, validation
and test items of each (held out at the end of the training source, or read from a source of their
own)."""

from __future__ import annotations

from datamodules.sources.base import Source
from datamodules.streams import Feed
from tasks import Task


def by_modality(source: Source | list[Source] | None, what: str) -> dict[str, Source]:
    """Sources by the modality of their items (at most one each)."""
    sources = [] if source is None else [source] if isinstance(source, Source) else list(source)
    found: dict[str, Source] = {}
    for src in sources:
        if src.modality in found:
            raise ValueError(f"{what} holds two {src.modality} sources; give one source per modality")
        found[src.modality] = src
    if what == "source" and not found:
        raise ValueError("source is empty: give a source (or one per modality)")
    return found


def check_modalities(sources: dict[str, Source], held_out: dict[str, dict[str, Source]], tasks: list[Task]) -> None:
    """Every task has a source of its modality and every source a task (an unused one is a config
    mistake)."""
    for task in tasks:
        if task.modality not in sources:
            given = ", ".join(f"{type(s).__name__} ({m})" for m, s in sources.items())
            raise ValueError(f"task {task.name!r} takes {task.modality} items but the sources give {given}")
    for what, group in (("source", sources), *((f"{split}_source", g) for split, g in held_out.items())):
        unused = set(group) - {task.modality for task in tasks}
        if unused:
            raise ValueError(f"{what} gives {sorted(unused)} items that no task takes")


def split_feeds(
    sources: dict[str, Source],
    held_out: dict[str, dict[str, Source]],
    sizes: dict[str, int],
) -> dict[str, dict[str, Feed]]:
    """The training, validation and test feeds of each modality."""
    feeds: dict[str, dict[str, Feed]] = {"train": {}, "val": {}, "test": {}}
    for modality, source in sources.items():
        own = {split: held_out[split].get(modality) for split in sizes}
        train, ranges = _split_one(source, own, sizes)
        feeds["train"][modality] = Feed(source, train)
        for split, items in ranges.items():
            other = own[split]  # spares from its own source replace unusable held-out items; none from training
            pool = items if other is None else range(len(other))
            feeds[split][modality] = Feed(source if other is None else other, items, pool)
    for split in sizes:
        if len({bool(feed.items) for feed in feeds[split].values()}) > 1:
            raise ValueError(f"a {split}_source is empty while other modalities have {split} items")
    return feeds


def _split_one(source: Source, own: dict[str, Source | None], sizes: dict[str, int]) -> tuple[range, dict[str, range]]:
    """Indices of the training items (in ``source``) and of each held-out split's items: in its own
    source if given, else at the end of ``source`` (validation last, test just before it), disjoint
    from training and from each other."""
    n = len(source)
    if n == 0:
        raise ValueError(f"{type(source).__name__} is empty")
    taken = {split: size for split, size in sizes.items() if own[split] is None and size}
    if sum(taken.values()) >= n:
        held = " + ".join(f"{split}_size={size}" for split, size in taken.items())
        raise ValueError(
            f"{held} would hold out all {n} items of {type(source).__name__}, leaving none to train "
            f"on; lower {' or '.join(f'{split}_size' for split in taken)} or give a "
            f"{' or '.join(f'{split}_source' for split in taken)}"
        )
    end = n
    ranges = {}
    for split, size in sizes.items():
        if own[split] is not None:
            ranges[split] = range(min(size, len(own[split])))
        else:
            ranges[split], end = range(end - size, end), end - size
    return range(end), ranges
