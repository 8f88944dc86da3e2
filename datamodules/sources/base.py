"""The raw-media source contract: an indexable collection of items of one modality."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar


class Source(ABC):
    """An indexable collection of raw media items (PIL images, clips, waveforms, ...).

    ``__getitem__`` raises `tasks.SkipItem` for an item that cannot be decoded; the data module skips it,
    counts it and logs it once with ``describe(index)``.
    """

    modality: ClassVar[str]

    @abstractmethod
    def __len__(self) -> int:
        """Number of items."""

    @abstractmethod
    def __getitem__(self, index: int) -> Any:
        """The item at ``index``; raises `tasks.SkipItem` when it cannot be used."""

    def describe(self, index: int) -> str:
        """A human-readable name for an item (its path for file sources), used in skip logs."""
        return f"{type(self).__name__}[{index}]"
