"""`zoo.devices`: the one-device and FSDP2 placement GRPO and SFT share."""

import pytest
import torch

from zoo.grpo import GRPOFSDPStrategy, GRPOStrategy
from zoo.sft import SFTFSDPStrategy, SFTStrategy


@pytest.mark.parametrize(
    ("cls", "instead"), [(GRPOStrategy, "zoo.grpo.GRPODDPStrategy"), (SFTStrategy, "zoo.sft.SFTDDPStrategy")]
)
def test_a_one_device_strategy_refuses_two_devices_and_names_the_one_to_use(cls, instead):
    strategy = cls()
    assert strategy.parallel_devices is None and strategy.root_device == torch.device("cpu")
    strategy.parallel_devices = [torch.device("cpu")] * 2  # what the trainer fills in for devices: 2
    with pytest.raises(ValueError, match=f"{cls.__name__} trains on one device but the trainer has 2; use {instead}"):
        strategy.setup_environment()


@pytest.mark.parametrize("cls", [GRPOFSDPStrategy, SFTFSDPStrategy])
def test_fsdp_strategies_take_dtypes_by_name(cls):
    assert cls().fsdp_kwargs == {}
    policy = cls(param_dtype="bfloat16").fsdp_kwargs["mp_policy"]
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    with pytest.raises(ValueError, match="param_dtype must name a torch dtype such as 'bfloat16', got 'bf16'"):
        cls(param_dtype="bf16")
