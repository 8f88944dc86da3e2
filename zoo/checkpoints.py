"""Checkpoints on disk: atomic writes on any filesystem layout, the clean-up of what a killed write
left, and ``--ckpt_path last`` as the newest checkpoint of a run that loads.

A checkpoint is written beside its target under a temporary name that says which process writes it,
flushed to disk (fsync) and renamed into place: a rename within one directory is atomic, so a kill
leaves the previous checkpoint whole and, at worst, a temporary file that the next run removes
(Lightning's own writer stages the bytes in ``TMPDIR`` and *copies* them over when that is another
filesystem, so a kill there truncates the target).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import zipfile
from pathlib import Path

import torch
from lightning.fabric.plugins import TorchCheckpointIO

#: What Lightning's sharded (FSDP2) checkpoint folder holds besides the shards: the non-tensor
#: state.
SHARDED_META = "meta.pt"
_HOST = re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname())
_TEMPORARY = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)\.(?:partial|old)$")


def temporary_path(target: str | Path, kind: str = "partial") -> Path:
    """Where a write of ``target`` is staged (``kind`` "partial") or the replaced one set aside
    ("old"): the same directory, a hidden name carrying this host and process id so that only dead
    writers' files are cleaned up."""
    target = Path(target)
    return target.parent / f".{target.name}.{_HOST}-{os.getpid()}.{kind}"


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer for single files, made atomic on any filesystem layout: the
    bytes go to a temporary file beside the target (never to ``TMPDIR``), are fsynced, and replace
    the target in one rename."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = temporary_path(target)
        try:
            with open(partial, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            publish(partial, target)
        finally:
            _remove(partial)  # only left when the write failed: a kill leaves it to `remove_stale`


def publish(partial: Path, target: Path) -> None:
    """Move a fully written checkpoint (a file or a sharded folder) onto ``target``: flushed to disk
    first, then renamed within the directory (atomic for a file; a folder replacing a folder is set
    aside first, so a kill in between leaves no ``target`` but the older checkpoints whole)."""
    _fsync_tree(partial)
    if target.exists() and (target.is_dir() or partial.is_dir()):
        old = temporary_path(target, "old")
        os.replace(target, old)
        os.replace(partial, target)
        _remove(old)
    else:
        os.replace(partial, target)
    _fsync(target.parent)


def remove_stale(directory: str | Path) -> list[Path]:
    """Remove the temporary files and folders of checkpoint writes in ``directory`` whose writing
    process (on this host) is gone; returns what was removed. Writes still running, or from other
    hosts, are kept."""
    directory, removed = Path(directory), []
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        match = _TEMPORARY.match(path.name)
        if match and match["host"] == _HOST and not _alive(int(match["pid"])):
            _remove(path)
            removed.append(path)
    return removed


def unloadable(path: str | Path) -> str | None:
    """Why the checkpoint at ``path`` cannot be loaded (None when it can): a file must open as a
    torch archive with ``weights_only=True`` (memory-mapped, so tensors are not read: a truncated or
    foreign file fails, a large one costs little); a sharded folder needs its ``.metadata`` and a
    loadable meta file."""
    path = Path(path)
    if not path.exists():
        return "no such file or folder"
    if path.is_dir() and not (path / ".metadata").is_file():
        return "a folder without the .metadata of a sharded checkpoint"
    if path.is_file() and not zipfile.is_zipfile(path):
        return "not a torch checkpoint archive (cut short, or another format)"
    try:
        torch.load(path / SHARDED_META if path.is_dir() else path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated, not a torch archive, or holding objects weights_only refuses
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


def newest_loadable(directories: list[Path]) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The most recently written ``*.ckpt`` (file or sharded folder) in ``directories`` that loads,
    and the newer ones passed over with the reason; stale temporary files there are removed
    first."""
    found = []
    for directory in directories:
        remove_stale(directory)
        found += [p for p in directory.glob("*.ckpt")] if directory.is_dir() else []
    passed = []
    for path in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True):
        reason = unloadable(path)
        if reason is None:
            return path, passed
        passed.append((path, reason))
    return None, passed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def _fsync_tree(path: Path) -> None:
    """Flush a file, or every file of a folder and the folders themselves, to disk."""
    if path.is_dir():
        for root, _, files in os.walk(path):
            for name in files:
                _fsync(Path(root) / name)
            _fsync(Path(root))
    else:
        _fsync(path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_checkpoint(pretrained: str) -> bool:
    """A Lightning checkpoint: a ``.ckpt`` file, or the folder of shards `zoo.grpo.GRPOFSDPStrategy`
    saves."""
    path = Path(pretrained).expanduser()
    return (path.is_file() and path.suffix == ".ckpt") or (path.is_dir() and (path / ".metadata").is_file())


def read_checkpoint(path: str | Path) -> dict:
    """A Lightning checkpoint as a dict, read with ``weights_only=True``: one ``.ckpt`` file, or the
    folder of shards that `zoo.grpo.GRPOFSDPStrategy` writes (consolidated in memory)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.is_file():
        return torch.load(path, map_location="cpu", weights_only=True)
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(path, Path(tmp) / "full.pt")
        checkpoint = torch.load(Path(tmp) / "full.pt", map_location="cpu", weights_only=True)
    meta = path / "meta.pt"  # Lightning's non-tensor state beside the shards
    if meta.is_file():
        checkpoint.update(torch.load(meta, map_location="cpu", weights_only=True))
    return checkpoint
