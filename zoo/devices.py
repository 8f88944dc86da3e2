"""Where a zoo strategy runs, shared by GRPO and SFT: one device, or FSDP2 over every process. Each
is a mixin that goes first in a strategy's bases (``class GRPOStrategy(OneDevice, GRPOMixin,
SingleDeviceStrategy)``)."""

from __future__ import annotations

from typing import ClassVar

import torch


class OneDevice:
    """One device for a strategy over `SingleDeviceStrategy`: the given one, else the trainer's
    accelerator's first; more than one device is refused with the name of the strategy to use
    instead (``parallel``)."""

    parallel: ClassVar[str]

    def __init__(self, device: str | None = None, **kwargs):
        super().__init__(device=device or "cpu", **kwargs)
        self.parallel_devices = None if device is None else [self._root_device]  # the trainer fills None

    @property
    def root_device(self) -> torch.device:
        return self.parallel_devices[0] if self.parallel_devices else self._root_device

    def setup_environment(self) -> None:
        if self.parallel_devices and len(self.parallel_devices) > 1:
            raise ValueError(
                f"{type(self).__name__} trains on one device but the trainer has "
                f"{len(self.parallel_devices)}; use {self.parallel}"
            )
        super().setup_environment()


class FSDP2:
    """FSDP2 for a strategy over Lightning's `ModelParallelStrategy`: a data-parallel mesh over
    every process, the policy's blocks sharded in ``configure_model`` with `fsdp_kwargs`, mixed
    precision by dtype name."""

    def __init__(self, param_dtype: str | None = None, reduce_dtype: str | None = "float32", **kwargs):
        super().__init__(data_parallel_size="auto", tensor_parallel_size=1, **kwargs)
        for name, value in (("param_dtype", param_dtype), ("reduce_dtype", reduce_dtype)):
            if not (value is None or isinstance(getattr(torch, value, None), torch.dtype)):
                raise ValueError(f"{name} must name a torch dtype such as 'bfloat16', got {value!r}")
        self.param_dtype = param_dtype
        self.reduce_dtype = reduce_dtype

    @property
    def fsdp_kwargs(self) -> dict:
        """Keyword arguments of ``fully_shard`` for the policy's blocks (the mixed-precision
        policy)."""
        if self.param_dtype is None:
            return {}
        from torch.distributed.fsdp import MixedPrecisionPolicy

        reduce = getattr(torch, self.reduce_dtype) if self.reduce_dtype else None
        return {"mp_policy": MixedPrecisionPolicy(param_dtype=getattr(torch, self.param_dtype), reduce_dtype=reduce)}

    def setup_environment(self) -> None:
        self._data_parallel_size = self.world_size  # every process is a data-parallel shard
        super().setup_environment()
