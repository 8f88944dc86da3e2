"""``zoo export``: a training checkpoint to a Hugging Face directory (LoRA merged, processor and chat template
included) that ``from_pretrained`` and serving engines load."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

import torch

from zoo.policy import PolicyModule
from zoo.trust import plain_hparams, policy_class


def read_checkpoint(path: str | Path) -> dict:
    """A Lightning checkpoint as a dict, read with ``weights_only=True``: one ``.ckpt`` file, or the folder
    of shards that `zoo.grpo.GRPOFSDPStrategy` writes (consolidated in memory)."""
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


def policy_from_checkpoint(path: str | Path, allowed: Iterable[str] = ()) -> PolicyModule:
    """Rebuild the policy a checkpoint was trained with (its class and hyperparameters) and load its weights.

    Args:
        path: The checkpoint.
        allowed: Import paths of policy classes outside zoo that the checkpoint may name (`zoo.trust`).
    """
    checkpoint = read_checkpoint(path)
    hparams = checkpoint.get("hyper_parameters") or {}
    if not isinstance(hparams, dict):
        raise ValueError(f"{path}: hyper_parameters must be a dict, got {type(hparams).__name__}")
    class_path = checkpoint.get("policy_class") or hparams.get("_class_path")
    if not class_path:
        raise ValueError(f"{path} names no policy class: was it written by a zoo PolicyModule?")
    cls = policy_class(class_path, allowed)
    policy = cls(**plain_hparams(hparams, str(path)))
    policy.configure_model()
    policy.load_state_dict(checkpoint["state_dict"])
    return policy


def export(ckpt: str | Path, out: str | Path, allowed: Iterable[str] = ()) -> Path:
    """Write the checkpoint's policy to ``out`` as a Hugging Face directory; returns ``out``. ``allowed``: see
    `policy_from_checkpoint`."""
    policy = policy_from_checkpoint(ckpt, allowed)
    policy.save_pretrained(str(out))
    return Path(out)
