"""FSDP2 for policies: which submodules become sharding units, and gathering them for a whole
``generate``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


def shard_blocks(model: nn.Module, names: set[str]) -> Iterator[nn.Module]:
    """The outermost submodules of ``model`` whose class name is in ``names``, in module order.

    Checkpoints list nested blocks in ``_no_split_modules``: Qwen2-Audio its encoder layers and
    their attention, Qwen2.5-Omni its audio and vision encoders and their layers. A parameter
    belongs to one FSDP2 unit, so each is sharded exactly once: the outermost, because "no split"
    means the block stays whole, and the innermost would leave the outer block's own weights
    (Qwen2-Audio's encoder-layer MLPs) to the root unit, which stays gathered from the first forward
    to the last backward. The cost is one unit per Omni encoder, on the 7B smaller than the root's
    embeddings and head.
    """
    for child in model.children():
        if type(child).__name__ in names:
            yield child
        else:
            yield from shard_blocks(child, names)


def shard(model: nn.Module, mesh, **kwargs) -> None:
    """``fully_shard`` every block ``model`` names in ``_no_split_modules`` (`shard_blocks`), then
    the root, which takes every parameter outside them (embeddings, head, the encoders of spliced
    policies).

    Args:
        model: The Hugging Face model (or `zoo.spliced.SplicedLM`).
        mesh: The 1-D data-parallel device mesh.
        **kwargs: More ``fully_shard`` arguments (``mp_policy``).
    """
    from torch.distributed.fsdp import fully_shard

    for block in list(shard_blocks(model, set(getattr(model, "_no_split_modules", None) or []))):
        fully_shard(block, mesh=mesh, **kwargs)
    fully_shard(model, mesh=mesh, **kwargs)


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` is FSDP2-sharded (each of its forwards gathers weights with the other
    ranks)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def reshard(model: nn.Module) -> None:
    """Shard again what a forward without backward left gathered: FSDP2 keeps the root unit's
    parameters (embeddings, head) after the forward for the backward it expects, which a frozen
    model never runs."""
    from torch.distributed.fsdp import FSDPModule

    for unit in model.modules():
        if isinstance(unit, FSDPModule):
            unit.reshard()


@contextmanager
def unsharded(model: nn.Module):
    """Gather FSDP2-sharded parameters once for a whole ``generate`` call (one all-gather per
    rollout, not one per decoding step) and shard them again afterwards; a no-op for an unsharded
    model."""
    from torch.distributed.fsdp import FSDPModule

    units = [m for m in model.modules() if isinstance(m, FSDPModule)]
    if units:  # generate may run the vision blocks before the root: make the root FSDP's root first
        units[0]._get_fsdp_state()._lazy_init()
    for unit in units:
        unit.set_reshard_after_forward(False, recurse=False)
        unit.unshard()
    try:
        yield
    finally:
        for unit in units:
            unit.set_reshard_after_forward(True, recurse=False)
            unit.reshard()
