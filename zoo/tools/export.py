"""``zoo export``: a training checkpoint to a Hugging Face directory (LoRA merged, processor and chat template
included) that ``from_pretrained`` and serving engines load."""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path

import torch

from zoo.policy import PolicyModule

#: Hyperparameters LightningCLI stores beside the policy's own arguments, and the training-only factories.
_NOT_ARGUMENTS = ("_class_path", "_instantiator", "optimizer", "scheduler")


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


def policy_from_checkpoint(path: str | Path) -> PolicyModule:
    """Rebuild the policy a checkpoint was trained with (its class and hyperparameters) and load its weights."""
    checkpoint = read_checkpoint(path)
    hparams = dict(checkpoint.get("hyper_parameters") or {})
    class_path = checkpoint.get("policy_class") or hparams.get("_class_path")
    if not class_path:
        raise ValueError(f"{path} names no policy class: was it written by a zoo PolicyModule?")
    module_name, _, name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), name)
    policy = cls(**{k: v for k, v in hparams.items() if k not in _NOT_ARGUMENTS})
    policy.configure_model()
    policy.load_state_dict(checkpoint["state_dict"])
    return policy


def export(ckpt: str | Path, out: str | Path) -> Path:
    """Write the checkpoint's policy to ``out`` as a Hugging Face directory; returns ``out``."""
    policy = policy_from_checkpoint(ckpt)
    policy.save_pretrained(str(out))
    return Path(out)
