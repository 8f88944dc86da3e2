"""Lean activations (`zoo.activations`): the same values and gradients, bit for bit, as the modules
they replace, and the saved tensors they drop are really gone."""

import copy

import pytest
import torch
from torch import nn

from tests.zoo.test_logprobs_policies import load, train_pass
from tests.zoo.test_policy_contract import CASES, examples_for
from zoo.activations import is_gated_mlp, lean_activations

D, INTER = 6, 10  # hidden and intermediate widths


class Gated(nn.Module):
    """The gated MLP of Qwen / Llama (with biases, as Qwen2.5-VL's vision MLP has)."""

    def __init__(self, act: nn.Module, bias: bool = True):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(D, INTER, bias=bias), nn.Linear(D, INTER, bias=bias)
        self.down_proj, self.act_fn = nn.Linear(INTER, D, bias=bias), act

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Ungated(Gated):
    """Same parts, another formula: must be left alone."""

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) + self.up_proj(x))


class ToyRMSNorm(nn.Module):
    """Qwen2's RMS norm: a float32 copy of the input, scaled, cast back."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(D))

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


class Block(nn.Module):
    def __init__(self, act: nn.Module, bias: bool = True):
        super().__init__()
        self.norm, self.mlp = ToyRMSNorm(), Gated(act, bias)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


def grads_of(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, dict]:
    x = x.detach().requires_grad_()
    out = model(x)
    (out.float() * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out.detach(), {"x": x.grad, **{n: p.grad for n, p in model.named_parameters()}}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act", [nn.SiLU(), nn.GELU(approximate="tanh")], ids=["silu", "gelu"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("tokens", [15, 2500], ids=["one-chunk", "three-chunks"])  # the backward takes 1024 at a time
def test_lean_block_matches_bit_for_bit(dtype, act, bias, tokens):
    torch.manual_seed(0)
    model = Block(act, bias).to(dtype)
    lean = copy.deepcopy(model)
    assert lean_activations(lean, min_width=0) == 2
    x = torch.randn(5, tokens // 5, D, dtype=dtype)
    (out, grads), (lean_out, lean_grads) = grads_of(model, x), grads_of(lean, x)
    assert torch.equal(out, lean_out)
    assert grads.keys() == lean_grads.keys()
    for name in grads:
        if name == "x" and tokens > 1024:  # its two branches' gradients can add in another order: 1 ulp
            scale = float(grads[name].abs().max())
            torch.testing.assert_close(grads[name], lean_grads[name], rtol=0, atol=1e-6 * scale)
        else:
            assert torch.equal(grads[name], lean_grads[name]), name


def test_autocast_matches():
    torch.manual_seed(0)
    model = Block(nn.SiLU())
    lean = copy.deepcopy(model)
    lean_activations(lean, min_width=0)
    x = torch.randn(2, 4, D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (out, grads), (lean_out, lean_grads) = grads_of(model, x), grads_of(lean, x)
    assert torch.equal(out, lean_out)
    for name in grads:
        assert grads[name].dtype == lean_grads[name].dtype == torch.float32
        assert torch.equal(grads[name], lean_grads[name]), name


def test_frozen_parts_get_no_gradient():
    torch.manual_seed(0)
    model = Block(nn.SiLU())
    model.mlp.down_proj.requires_grad_(False)
    model.norm.requires_grad_(False)
    lean = model
    lean_activations(lean, min_width=0)
    _, lean_grads = grads_of(lean, torch.randn(2, 3, D))
    assert lean.mlp.down_proj.weight.grad is None and lean.norm.weight.grad is None
    assert lean_grads["mlp.gate_proj.weight"] is not None


def saved_bytes(fn, x: torch.Tensor) -> dict[torch.dtype, int]:
    """Bytes of the distinct tensors autograd saves in ``fn(x)``, by dtype (parameters aside)."""
    found, params = {}, set()
    for t in fn.parameters():
        params.add(t.untyped_storage().data_ptr())

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            found[ptr] = (t.dtype, t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x)
    totals: dict[torch.dtype, int] = {}
    for dtype, nbytes in found.values():
        totals[dtype] = totals.get(dtype, 0) + nbytes
    return totals


def test_gated_mlp_saves_its_projections_only():
    torch.manual_seed(0)
    mlp = Gated(nn.SiLU(), bias=False).to(torch.bfloat16)
    x = torch.randn(4, 8, D, dtype=torch.bfloat16, requires_grad=True)
    inter = 4 * 8 * INTER * 2  # one [4, 8, I] bfloat16 tensor
    before = saved_bytes(mlp, x)[torch.bfloat16]
    lean_activations(mlp, min_width=0)
    after = saved_bytes(mlp, x)[torch.bfloat16]
    # before: the input, gate, activation, up and product; after: the input, gate and up
    assert before - after == 2 * inter


def test_rms_norm_keeps_no_float32_copy():
    norm = ToyRMSNorm().to(torch.bfloat16)
    x = torch.randn(4, 8, D, dtype=torch.bfloat16, requires_grad=True)
    assert saved_bytes(norm, x).get(torch.float32, 0) >= 4 * 8 * D * 4
    lean_activations(norm, min_width=0)
    assert saved_bytes(norm, x).get(torch.float32, 0) < 4 * 8 * D * 4  # [4, 8, 1] of rsqrt at most


def test_narrow_modules_are_left_alone():
    wide = nn.Sequential(Gated(nn.SiLU()), ToyRMSNorm())
    assert lean_activations(wide, min_width=INTER) == 1  # the MLP (intermediate 10), not the norm (6)
    assert "forward" in vars(wide[0]) and "forward" not in vars(wide[1])


def test_only_the_gated_formula_is_replaced():
    assert is_gated_mlp(Gated(nn.SiLU()))
    assert not is_gated_mlp(Ungated(nn.SiLU()))
    model = nn.Sequential(Ungated(nn.SiLU()), nn.LayerNorm(D))
    assert lean_activations(model, min_width=0) == 0


@pytest.mark.parametrize("cls,ckpt", CASES, ids=[f"{cls.__name__}-{c}" for cls, c in CASES])
def test_every_policy_family_scores_the_same_with_lean_activations(cls, ckpt):
    """The policy default (lean) against ``lean_activations: false``, through every family's tiny
    checkpoint, media included: the same scores and parameter gradients, bit for bit."""
    plain = load(cls, ckpt, lean_activations=False)
    lean = load(cls, ckpt, lean_activations=False)
    assert lean_activations(lean.model, min_width=0) > 0  # the tiny widths are below the default
    rollout = plain.sample(examples_for(plain), 2, max_new_tokens=5, seed=1, temperature=0.8)
    expected, expected_grads = train_pass(plain, rollout, 256)
    got, grads = train_pass(lean, rollout, 256)
    for key in expected:
        assert torch.equal(got[key], expected[key]), key
    assert grads.keys() == expected_grads.keys() and grads
    for name in grads:
        assert torch.equal(grads[name], expected_grads[name]), name
