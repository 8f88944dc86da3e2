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
import pickle
import re
import shutil
import socket
import stat
import tempfile
import zipfile
from pathlib import Path

import torch
from lightning.fabric.plugins import TorchCheckpointIO

from zoo.errors import writing

#: What Lightning's sharded (FSDP2) checkpoint folder holds besides the shards: the non-tensor
#: state.
SHARDED_META = "meta.pt"
#: The index of the shards that torch.distributed.checkpoint writes (and unpickles with plain
#: pickle).
SHARDED_INDEX = ".metadata"
#: All that a sharded checkpoint's index may name (module: names): torch.distributed.checkpoint's
#: metadata classes and what they hold; anything else (a function, a class with side effects) is
#: refused before torch reads the folder.
INDEX_GLOBALS = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata",
        "MetadataIndex",
        "StorageMeta",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "TensorProperties",
        "_MEM_FORMAT_ENCODING",
    },
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"},  # a lookup of torch's layouts by name
    "torch": {"Size"},  # and the dtypes (`torch.float32`, ...)
    "pathlib": {"PosixPath", "PurePosixPath"},  # the path it was saved to
}
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
            with writing(target), open(partial, "wb") as f:
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
    foreign file fails, a large one costs little); a sharded folder needs an index that
    `check_index` accepts and a loadable meta file. Nothing but a regular file is ever opened (a
    FIFO would block the read forever)."""
    path = Path(path)
    kind = _kind(path)
    if kind is None:
        return "no such file or folder (or a dangling link)"
    if kind == "other":
        return "not a regular file or folder"
    if kind == "folder":
        if _kind(path / SHARDED_INDEX) != "file":
            return f"a folder without the {SHARDED_INDEX} of a sharded checkpoint as a regular file"
        if _kind(path / SHARDED_META) != "file":
            return f"a sharded checkpoint without its {SHARDED_META} as a regular file"
    elif not zipfile.is_zipfile(path):
        return "not a torch checkpoint archive (cut short, or another format)"
    try:
        if kind == "folder":
            check_index(path)
        torch.load(path / SHARDED_META if kind == "folder" else path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated, not a torch archive, or holding objects weights_only refuses
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


def newest_loadable(directories: list[Path]) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The most recently written ``*.ckpt`` (file or sharded folder) in ``directories`` that loads,
    and the newer ones passed over with the reason (entries that are neither, dangling links and
    entries that vanish during the scan included); stale temporary files there are removed
    first."""
    found = []
    passed = []
    for directory in directories:
        remove_stale(directory)
        for path in directory.glob("*.ckpt") if directory.is_dir() else []:
            try:
                found.append((os.stat(path).st_mtime, path))
            except FileNotFoundError:
                passed.append((path, "no such file or folder (a dangling link, or removed during the scan)"))
            except OSError as err:
                passed.append((path, f"{type(err).__name__}: {err.strerror or err}"))
    for _, path in sorted(found, key=lambda item: item[0], reverse=True):
        reason = unloadable(path)
        if reason is None:
            return path, passed
        passed.append((path, reason))
    return None, passed


def check_index(folder: str | Path) -> None:
    """Read a sharded checkpoint's index (``.metadata``) as torch.distributed.checkpoint writes it,
    naming only `INDEX_GLOBALS`: torch reads it with plain ``pickle``, which would run whatever
    code it names, so zoo checks it before torch or Lightning is given the folder.

    Raises:
        ValueError: The index names anything else, or is no index.
    """
    from torch.distributed.checkpoint.metadata import Metadata

    index = Path(folder) / SHARDED_INDEX
    if _kind(index) != "file":
        raise ValueError(f"{index}: no such regular file; a sharded checkpoint folder holds one")
    try:
        with open(index, "rb") as f:
            metadata = _IndexUnpickler(f).load()
    except _Refused as err:
        raise ValueError(
            f"{index} refused: it names {err}, which the index of a sharded checkpoint never holds "
            "(unpickling it would run code); a checkpoint is data"
        ) from None
    except Exception as err:
        raise ValueError(f"{index} refused: not the index of a sharded checkpoint ({type(err).__name__})") from None
    if not isinstance(metadata, Metadata):
        raise ValueError(f"{index} refused: it holds a {type(metadata).__name__}, not a checkpoint index")


class _Refused(Exception):
    """A global the index names that `INDEX_GLOBALS` does not list."""


class _IndexUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        dtype = module == "torch" and "." not in name and isinstance(getattr(torch, name, None), torch.dtype)
        if name in INDEX_GLOBALS.get(module, ()) or dtype:
            return super().find_class(module, name)
        raise _Refused(f"{module}.{name}")


def _kind(path: Path) -> str | None:
    """``file``, ``folder``, ``other`` (a FIFO, socket or device: never opened) or None (missing,
    or a dangling link); links are followed."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "other"


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
    kind = _kind(path)
    return (kind == "file" and path.suffix == ".ckpt") or (kind == "folder" and _kind(path / SHARDED_INDEX) == "file")


def read_checkpoint(path: str | Path) -> dict:
    """A Lightning checkpoint as a dict, read with ``weights_only=True``: one ``.ckpt`` file, or the
    folder of shards that `zoo.grpo.GRPOFSDPStrategy` writes (consolidated in memory, its index
    checked first: `check_index`)."""
    path = Path(path)
    kind = _kind(path)
    if kind is None:
        raise FileNotFoundError(f"no checkpoint at {path}")
    if kind == "file":
        return torch.load(path, map_location="cpu", weights_only=True)
    if kind == "other":
        raise ValueError(f"{path} is not a checkpoint: neither a regular file nor a folder")
    check_index(path)
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(path, Path(tmp) / "full.pt")
        checkpoint = torch.load(Path(tmp) / "full.pt", map_location="cpu", weights_only=True)
    meta = path / SHARDED_META  # Lightning's non-tensor state beside the shards
    if _kind(meta) == "file":
        checkpoint.update(torch.load(meta, map_location="cpu", weights_only=True))
    return checkpoint
