"""zoo's cache of built models (``$ZOO_CACHE``, by default ``~/.cache/zoo``): tiny random-init
models, exported checkpoints. Each entry is built once into a temporary folder beside it and renamed
into place, so concurrent builders (DDP ranks, parallel test workers) race safely and a killed build
never leaves a half entry."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from zoo.errors import writing


def cache_root() -> Path:
    """``$ZOO_CACHE``, by default ``~/.cache/zoo``."""
    return Path(os.environ.get("ZOO_CACHE", Path.home() / ".cache" / "zoo"))


def build_once(target: Path, build: Callable[[Path], object]) -> Path:
    """``target``, a model directory: built by ``build(folder)`` the first time (a directory without
    a ``config.json`` counts as not built), then published atomically."""
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        with writing(target):
            build(tmp)
        tmp.rename(target)
    except OSError:
        if not (target / "config.json").exists():  # not a lost race: the build itself failed
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
