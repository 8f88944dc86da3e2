"""Leaner activations saved for the backward pass, with the same values and gradients.

Gated MLPs (``down_proj(act_fn(gate_proj(x)) * up_proj(x))``: Qwen, Llama, Gemma, ...) keep only
their two projections and recompute the activation and the product in the backward (`GatedDown`).
RMS norms keep only their input and recompute their float32 copies (`torch.utils.checkpoint`).
Both recompute elementwise work only, never a matrix product.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

#: The forward a gated MLP must have (whitespace and the input's name aside) to be made lean.
_GATED = re.compile(r"self\.down_proj\(self\.act_fn\(self\.gate_proj\((\w+)\)\)\*self\.up_proj\(\1\)\)")


class GatedDown(torch.autograd.Function):
    """``linear(act(gate) * up, weight, bias)`` that saves ``gate`` and ``up`` (``[..., I]``) but
    not the activation or the product: the backward recomputes them (elementwise) from the two."""

    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor, weight: Tensor, bias: Tensor | None, act: Callable) -> Tensor:
        out = nn.functional.linear(act(gate) * up, weight, bias)  # [..., D]; autocast applies
        ctx.save_for_backward(gate, up, weight)
        ctx.act, ctx.dtype, ctx.bias_dtype = act, out.dtype, None if bias is None else bias.dtype
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        gate, up, weight = ctx.saved_tensors
        need_gate, need_up, need_weight, need_bias = ctx.needs_input_grad[:4]
        flat = grad.reshape(-1, grad.shape[-1])  # [tokens, D]
        grad_weight = grad_bias = grad_gate = grad_up = None
        if need_weight:  # what autograd computes for linear's weight: grad^T @ input
            product = (ctx.act(gate) * up).to(ctx.dtype)  # [..., I]
            grad_weight = flat.t().mm(product.reshape(-1, product.shape[-1])).to(weight.dtype)
            del product
        if need_bias:
            grad_bias = flat.sum(0).to(ctx.bias_dtype)
        if need_gate or need_up:
            grad_gate, grad_up = _gated_grads(ctx.act, gate, up, flat, weight.to(ctx.dtype), need_gate, need_up)
        return grad_gate, grad_up, grad_weight, grad_bias, None


def _gated_grads(act, gate, up, flat, weight, need_gate, need_up, rows: int = 1024):
    """Gradients on ``gate`` and ``up`` (``[..., I]``) of ``act(gate) * up`` given the one on the
    down projection's output ``flat`` ``[tokens, D]``, ``rows`` tokens at a time, so that the
    recomputed activation and its gradients are held for a few rows only (elementwise work: the
    same numbers as all at once)."""
    g2, u2 = gate.reshape(-1, gate.shape[-1]), up.reshape(-1, up.shape[-1])  # [tokens, I]
    grad_gate = torch.empty_like(g2) if need_gate else None
    grad_up = torch.empty_like(u2) if need_up else None
    for s in range(0, len(g2), rows):
        part = slice(s, s + rows)
        with torch.enable_grad():
            g, u = g2[part].detach().requires_grad_(need_gate), u2[part].detach().requires_grad_(need_up)
            product = act(g) * u  # [rows, I]
        grad_product = flat[part].mm(weight).to(product.dtype)  # [rows, I]
        grads = iter(torch.autograd.grad(product, [t for t in (g, u) if t.requires_grad], grad_product))
        if need_gate:
            grad_gate[part] = next(grads)
        if need_up:
            grad_up[part] = next(grads)
    return (
        None if grad_gate is None else grad_gate.reshape(gate.shape),
        None if grad_up is None else grad_up.reshape(up.shape),
    )


def _lean_gated_forward(self, x: Tensor) -> Tensor:
    down = self.down_proj
    if type(down) is not nn.Linear or not torch.is_grad_enabled():  # LoRA-wrapped, or nothing to save
        return down(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
    return GatedDown.apply(self.gate_proj(x), self.up_proj(x), down.weight, down.bias, self.act_fn)


def _lean_norm_forward(self, x: Tensor) -> Tensor:
    forward = type(self).forward.__get__(self)
    if not (torch.is_grad_enabled() and x.requires_grad):
        return forward(x)
    return checkpoint(forward, x, use_reentrant=False, preserve_rng_state=False)


def is_gated_mlp(module: nn.Module) -> bool:
    """Whether ``module``'s forward is exactly ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``."""
    if not all(hasattr(module, name) for name in ("gate_proj", "up_proj", "down_proj", "act_fn")):
        return False
    try:
        source = inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return False
    return _GATED.search("".join(source.split())) is not None


#: Narrower modules are left as they are: there the Python cost of the recomputation outweighs the
#: memory it saves (the tiny test models: 15% slower scoring passes with every module lean).
MIN_WIDTH = 1024


def _width(module: nn.Module) -> int:
    if is_gated_mlp(module):
        return getattr(module.down_proj, "in_features", 0)
    weight = getattr(module, "weight", None)
    return weight.shape[-1] if isinstance(weight, Tensor) else 0


def lean_activations(model: nn.Module, min_width: int = MIN_WIDTH) -> int:
    """Make every gated MLP (intermediate width) and RMS norm (width) of ``model`` at least
    ``min_width`` wide save less for the backward (see the module docstring); returns how many
    modules changed. Values and gradients are unchanged."""
    changed = 0
    for module in model.modules():
        if is_gated_mlp(module) and _width(module) >= min_width:
            module.forward = types.MethodType(_lean_gated_forward, module)
        elif type(module).__name__.endswith("RMSNorm") and not list(module.children()) and _width(module) >= min_width:
            module.forward = types.MethodType(_lean_norm_forward, module)
        else:
            continue
        changed += 1
    return changed
