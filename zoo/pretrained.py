"""What a policy's ``pretrained`` names, as a directory ``from_pretrained`` loads: a hub id or directory as is,
``tiny:<family>`` built offline (`zoo.tiny`), or a zoo training checkpoint (an SFT cold start, say) exported once."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from zoo import tiny


def is_checkpoint(pretrained: str) -> bool:
    """A Lightning checkpoint: a ``.ckpt`` file, or the folder of shards `zoo.grpo.GRPOFSDPStrategy` saves."""
    path = Path(pretrained).expanduser()
    return (path.is_file() and path.suffix == ".ckpt") or (path.is_dir() and (path / ".metadata").is_file())


def resolve(pretrained: str) -> str:
    """A local directory or hub id for ``pretrained``; a checkpoint is exported (`zoo.tools.export`, LoRA merged) to a
    cache folder named after its path, size and time, once (concurrent ranks race safely)."""
    if not is_checkpoint(pretrained):
        return tiny.resolve(pretrained)
    from zoo.tools.export import export

    path = Path(pretrained).expanduser().resolve()
    stat = path.stat()
    key = hashlib.sha1(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = tiny.cache_dir().parent / "checkpoints" / f"{path.stem}-{key}"
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{path.stem}-"))
        export(path, tmp)
        try:  # atomic publish
            tmp.rename(target)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)
