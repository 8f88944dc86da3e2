"""A training checkpoint as a Hugging Face directory (LoRA merged, processor and chat template
included) that ``from_pretrained`` and serving engines load: what ``zoo export`` writes, and what a
checkpoint given as a policy's ``pretrained`` becomes where a run is composed (`zoo.cli`,
`zoo.chain`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from zoo.cache import build_once, cache_root
from zoo.checkpoints import is_checkpoint, read_checkpoint
from zoo.errors import writing
from zoo.policy import PolicyModule
from zoo.trust import plain_hparams, policy_class

#: How many checkpoints deep a ``pretrained`` chain may go (each one names the next as its start).
MAX_CHAIN = 16


def policy_from_checkpoint(path: str | Path, allowed: Iterable[str] = (), chain: tuple[Path, ...] = ()) -> PolicyModule:
    """Rebuild the policy a checkpoint was trained with (its class and hyperparameters) and load its
    weights; a ``pretrained`` that is itself a checkpoint is exported first (`as_pretrained`).

    Args:
        path: The checkpoint.
        allowed: Import paths of policy classes outside zoo that the checkpoint may name
            (`zoo.trust`).
        chain: The checkpoints being exported that led to this one (a cycle is refused).
    """
    chain = (*chain, Path(path).expanduser().resolve())
    checkpoint = read_checkpoint(path)
    hparams = checkpoint.get("hyper_parameters") or {}
    if not isinstance(hparams, dict):
        raise ValueError(f"{path}: hyper_parameters must be a dict, got {type(hparams).__name__}")
    class_path = checkpoint.get("policy_class") or hparams.get("_class_path")
    if not class_path:
        raise ValueError(f"{path} names no policy class: was it written by a zoo PolicyModule?")
    cls = policy_class(class_path, allowed)
    kwargs = plain_hparams(hparams, cls, str(path))
    if isinstance(kwargs.get("pretrained"), str):
        kwargs["pretrained"] = as_pretrained(kwargs["pretrained"], chain)
    policy = cls(**kwargs)
    policy.configure_model()
    policy.load_state_dict(checkpoint["state_dict"])
    return policy


def export(ckpt: str | Path, out: str | Path, allowed: Iterable[str] = (), chain: tuple[Path, ...] = ()) -> Path:
    """Write the checkpoint's policy to ``out`` as a Hugging Face directory; returns ``out``.
    ``allowed`` and ``chain``: see `policy_from_checkpoint`."""
    policy = policy_from_checkpoint(ckpt, allowed, chain)
    with writing(out):
        policy.save_pretrained(str(out))
    return Path(out)


def as_pretrained(pretrained: str, chain: tuple[Path, ...] = ()) -> str:
    """A policy's ``pretrained`` as ``from_pretrained`` reads it: a checkpoint exported once (LoRA
    merged) to a cache folder named after its path, size and time; anything else as it is.

    Args:
        pretrained: A hub id, a model directory or a checkpoint.
        chain: The checkpoints being exported whose ``pretrained`` led here: one that leads back to
            itself is refused in one line, before anything is built.
    """
    if not is_checkpoint(pretrained):
        return pretrained
    path = Path(pretrained).expanduser().resolve()
    if path in chain or len(chain) >= MAX_CHAIN:
        shown = " -> ".join(p.name for p in (*chain, path))
        why = "starts from itself" if path in chain else f"is more than {MAX_CHAIN} checkpoints deep"
        raise ValueError(
            f"{chain[0]}: its pretrained {why} ({shown}); give a model directory, a hub id or a "
            "checkpoint that starts from one"
        )
    stat = path.stat()
    key = hashlib.sha1(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = cache_root() / "checkpoints" / f"{path.stem}-{key}"
    return str(build_once(target, lambda folder: export(path, folder, chain=chain)))
