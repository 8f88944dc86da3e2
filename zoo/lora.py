"""LoRA adapters (PEFT) injected in place into a policy's model, chosen by module group.

The model keeps its own class (no ``PeftModel`` wrapper), so `PolicyModule` code, module groups and
``save_pretrained`` see the usual attribute paths. With the adapters switched off the model computes
exactly its base weights: the KL reference without a second copy in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from torch import nn

from tasks.extras import require


@dataclass
class LoRA:
    """Low-rank adapters on the linear layers of some module groups; only the adapters train.

    Args:
        rank: Rank r of each adapter.
        alpha: Scaling numerator: the update is ``alpha / rank * B @ A``.
        dropout: Dropout on the adapter input.
        target_modules: Linear layers to adapt, by the last part of their name (``q_proj``, ``qkv``,
            ...); None adapts every linear layer of the groups (the output head excepted).
        groups: Module groups whose linear layers get adapters (see the policy's ``module_groups``):
            the language model by default; add ``vision`` / ``aligner`` / ``audio`` to adapt those
            towers.
    """

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: list[str] | None = None
    groups: list[str] = field(default_factory=lambda: ["llm"])

    def __post_init__(self):
        if self.rank < 1 or self.alpha <= 0 or not 0 <= self.dropout < 1:
            raise ValueError(f"LoRA needs rank >= 1, alpha > 0 and dropout in [0, 1), got {self}")
        if not self.groups:
            raise ValueError("LoRA.groups is empty: name at least one module group to adapt")


def target_names(model: nn.Module, groups: dict[str, list[nn.Module]], lora: LoRA) -> list[str]:
    """Full names of the linear layers of ``model`` that get adapters."""
    unknown = set(lora.groups) - set(groups)
    if unknown:
        raise ValueError(f"unknown LoRA groups {sorted(unknown)}; the model has {sorted(groups)}")
    chosen = {id(m) for g in lora.groups for module in groups[g] for m in module.modules()}
    head = model.get_output_embeddings()
    names = [
        name
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear)
        and id(m) in chosen
        and m is not head
        and (lora.target_modules is None or name.rsplit(".", 1)[-1] in lora.target_modules)
    ]
    if not names:
        raise ValueError(
            f"LoRA matched no linear layer in groups {lora.groups} with target_modules {lora.target_modules}"
        )
    return names


def add_adapters(model: nn.Module, groups: dict[str, list[nn.Module]], lora: LoRA) -> None:
    """Inject adapters into ``model`` in place and freeze everything else."""
    peft = require("peft", "lora", "the lora option needs peft")
    names = target_names(model, groups, lora)
    config = peft.LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=names)
    model.requires_grad_(False)
    peft.inject_adapter_in_model(config, model)
    for layer in _adapter_layers(model):
        layer.enable_adapters(True)  # marks the adapter weights (only them) trainable


def _adapter_layers(model: nn.Module) -> list:
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [m for m in model.modules() if isinstance(m, BaseTunerLayer)]


@contextmanager
def adapters_disabled(model: nn.Module) -> Iterator[None]:
    """The base model: adapters bypassed for the duration (trainable flags restored afterwards)."""
    layers = _adapter_layers(model)
    trainable = {p: p.requires_grad for layer in layers for p in layer.parameters()}
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)
        for param, flag in trainable.items():
            param.requires_grad_(flag)


def merge_adapters(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weight and put the plain layer back (for export)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for name, module in list(model.named_modules()):
        if isinstance(module, BaseTunerLayer):
            module.merge()
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, module.get_base_layer())
    if hasattr(model, "peft_config"):  # left by the injection; the merged model is a plain one
        del model.peft_config
    return model
