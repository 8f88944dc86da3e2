"""The raw-media source contract: an indexable collection of items of one modality."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar


class Source(ABC):
    """An indexable collection of raw media items (PIL images, clips, waveforms, ...).

    ``__getitem__`` raises `tasks.SkipItem` for an item that cannot be decoded; the data module
    skips it, counts it and logs it once with ``describe(index)``.
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


def find_files(root: str, extensions: tuple[str, ...], owner: str) -> tuple[Path, tuple[str, ...], list[str]]:
    """Files under ``root`` (recursively) whose suffix is one of ``extensions`` (case-insensitive,
    leading dot optional), sorted by path so that an index names the same file on every run.

    Returns:
        The root as a path, the normalised extensions, and the sorted file paths.

    Raises:
        FileNotFoundError: ``root`` is not a directory, or holds no matching file (named after
            ``owner``).
    """
    folder = Path(root).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{owner} root {str(folder)!r} is not an existing directory")
    suffixes = tuple("." * (not e.startswith(".")) + e.lower() for e in extensions)
    paths = sorted(str(p) for p in folder.rglob("*") if p.suffix.lower() in suffixes and p.is_file())
    if not paths:
        raise FileNotFoundError(f"no files ending in {suffixes} under {str(folder)!r}")
    return folder, suffixes, paths
