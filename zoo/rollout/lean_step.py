"""One decoding forward without Hugging Face's per-call work, for the decoder stacks whose
arithmetic it repeats op for op (`LeanStep.of` says which; the others keep the model's forward).

A decoding step of `zoo.rollout.decode` runs the model's ``forward`` on one token per row. On a
small model most of that time is not arithmetic: the nested ``forward`` wrappers and their
keyword handling, the causal mask rebuilt from the 2D mask, the rope positions concatenated and
re-sliced, the output dataclasses. `LeanStep` keeps what the steps need (the mask in a buffer,
the rotary tables of every step, computed at once by the model's rotary module, the cache layers)
and runs the embedding, each layer's norms, projections, ``apply_rotary_pos_emb`` (once, on the
queries and keys side by side: it is elementwise), cache write, attention function and MLP, the
final norm and the head: the same functions on the same values in the same order as the model's
forward, so the logits are the same bit for bit
(`tests/zoo/test_lean_step.py`), and so the sampled tokens.
"""

from __future__ import annotations

import sys

import torch
from torch import Tensor, nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from zoo.rollout.inplace import InPlaceLayer

#: Text models whose forward is embedding -> rotary -> layers -> norm with 3D (multimodal) rope
#: positions: ``[4, N, L]`` (text positions first) or ``[3, N, L]``.
MROPE_MODELS = {"Qwen2VLTextModel", "Qwen2_5_VLTextModel"}
#: The same with 1D positions ``[N, L]``.
ROPE_MODELS = {"Qwen2Model", "LlamaModel"}
#: Decoder layers, attentions and norms checked to compute what `LeanStep` computes.
LAYERS = {"Qwen2VLDecoderLayer", "Qwen2_5_VLDecoderLayer", "Qwen2DecoderLayer", "LlamaDecoderLayer"}
ATTENTIONS = {"Qwen2VLAttention", "Qwen2_5_VLAttention", "Qwen2Attention", "LlamaAttention"}
NORMS = {"Qwen2RMSNorm", "Qwen2VLRMSNorm", "Qwen2_5_VLRMSNorm", "LlamaRMSNorm"}
MLPS = {"Qwen2MLP", "LlamaMLP"}


def _norm(norm: nn.Module, x: Tensor) -> Tensor:
    """The RMS norm of `NORMS`: float32 variance, rsqrt, back to the input's dtype, times weight."""
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + norm.variance_epsilon)
    return norm.weight * x.to(dtype)


def _linear(module: nn.Module, x: Tensor) -> Tensor:
    """``module(x)``; a plain `nn.Linear` without its module call (LoRA layers keep theirs)."""
    return nn.functional.linear(x, module.weight, module.bias) if type(module) is nn.Linear else module(x)


def _text_model(lm: nn.Module) -> nn.Module | None:
    """The decoder stack of ``lm`` (a ``...ForConditionalGeneration`` or ``...ForCausalLM``)."""
    for path in ("model.language_model", "model.text_model", "language_model.model", "model"):
        module = lm
        for name in path.split("."):
            module = getattr(module, name, None)
        if module is not None and type(module).__name__ in MROPE_MODELS | ROPE_MODELS:
            return module
    return None


def _hooked(*modules: nn.Module) -> bool:
    """Whether any of ``modules`` or their submodules has forward hooks (FSDP2, offloading, ...)
    or DTensor parameters: then the model's own forward must run."""
    for module in modules:
        if any(m._forward_hooks or m._forward_pre_hooks for m in module.modules()):
            return True
        if any(type(p).__name__ == "DTensor" for p in module.parameters()):
            return True
    return False


class LeanStep:
    """Runs decoding forwards of one rollout: ``step(tokens [N, 1]) -> logits [N, V]``, the last
    position's logits the model's forward gives for the same inputs and cache. Built by `of`."""

    def __init__(self, lm: nn.Module, text: nn.Module, kwargs: dict, cache, capacity: int):
        self.text, self.head, self.cache = text, lm.get_output_embeddings(), cache
        self.mrope = type(text).__name__ in MROPE_MODELS
        layer = text.layers[0].self_attn
        self.rope = sys.modules[type(layer).__module__].apply_rotary_pos_emb
        self.attention = ALL_ATTENTION_FUNCTIONS.get_interface(text.config._attn_implementation, None)
        mask = kwargs["attention_mask"]  # [N, T]: the cache holds T - 1 positions, the first step the last
        self.prompt, steps = mask.shape[1], capacity - mask.shape[1] + 1
        # rows are left padded or not; new tokens never are, so a mask needed once is needed always
        self.padded = not bool(mask.all())
        self.mask = torch.ones((mask.shape[0], 1, 1, capacity), dtype=torch.bool, device=mask.device)
        self.mask[:, 0, 0, : mask.shape[1]] = mask.bool()  # [N, 1, 1, capacity]
        # every step's positions, as the forward's increments give them: [..., N, steps]
        last = kwargs["position_ids"][..., -1:]  # [..., N, 1] the last prompt token's
        positions = last + torch.arange(steps, dtype=last.dtype, device=last.device)
        rope_positions, self.text_positions = self._rope_positions(positions)
        # the rotary embedding is elementwise in the positions: all steps in one call
        like = torch.empty(0, dtype=text.embed_tokens.weight.dtype, device=mask.device)
        self.cos, self.sin = text.rotary_emb(like, rope_positions)  # [N, steps, head_dim] each
        self.step = 0

    @classmethod
    def of(cls, lm: nn.Module, kwargs: dict, cache, capacity: int) -> LeanStep | None:
        """A `LeanStep` for ``lm`` after the prefill, or None where the model's forward must run:
        a decoder stack not in `MROPE_MODELS` / `ROPE_MODELS`, layers, attention, norms or MLP of
        other classes, attention other than ``sdpa``, sliding-window layers, inputs other than
        ids, masks and positions (token types, ...), a cache not written in place, hooks or
        sharded parameters."""
        text = _text_model(lm)
        if text is None or kwargs.get("logits_to_keep", 1) != 1:
            return None
        # with positions given, Qwen-VL's forward reads its token types only to compute positions
        ignored = {"mm_token_type_ids"} if type(text).__name__ in MROPE_MODELS else set()
        if (
            set(kwargs)
            - {"input_ids", "attention_mask", "position_ids", "cache", "use_cache", "logits_to_keep"}
            - ignored
        ):
            return None
        if "attention_mask" not in kwargs or "position_ids" not in kwargs or lm.get_output_embeddings() is None:
            return None
        config = text.config
        if config._attn_implementation != "sdpa" or set(getattr(config, "layer_types", None) or ["full_attention"]) != {
            "full_attention"
        }:
            return None
        names = {
            (type(layer).__name__, type(layer.self_attn).__name__, type(layer.mlp).__name__) for layer in text.layers
        }
        norms = {
            type(n).__name__ for layer in text.layers for n in (layer.input_layernorm, layer.post_attention_layernorm)
        }
        if any(lay not in LAYERS or att not in ATTENTIONS or mlp not in MLPS for lay, att, mlp in names):
            return None
        if not norms | {type(text.norm).__name__} <= NORMS or getattr(text.layers[0].self_attn, "q_norm", None):
            return None
        rope_type = getattr(text.rotary_emb, "rope_type", "default")
        if "dynamic" in rope_type or rope_type == "longrope":  # frequencies that change with the length
            return None
        if not all(isinstance(layer, InPlaceLayer) for layer in cache.layers):
            return None
        # the root's own hooks and the stack's (the media encoders may have some: they do not run)
        if lm._forward_hooks or lm._forward_pre_hooks or _hooked(text, lm.get_output_embeddings()):
            return None
        return cls(lm, text, kwargs, cache, capacity)

    def _rope_positions(self, positions: Tensor) -> tuple[Tensor, Tensor | None]:
        """(positions the rotary embedding takes, text positions the attention is given) of the
        model's ``position_ids`` ``positions``."""
        if not self.mrope:
            return positions, positions
        if positions.ndim == 2:
            return positions[None, ...].expand(3, positions.shape[0], -1), None
        if positions.shape[0] == 4:
            return positions[1:], positions[0]
        return positions, None

    def _attend(self, attn: nn.Module, x: Tensor, cos: Tensor, sin: Tensor, layer: int, mask, text_positions):
        n, q_len, _ = x.shape
        query = _linear(attn.q_proj, x).view(n, q_len, -1, attn.head_dim)  # [N, 1, H, D]
        key = _linear(attn.k_proj, x).view(n, q_len, -1, attn.head_dim)  # [N, 1, Hkv, D]
        value = _linear(attn.v_proj, x).view(n, q_len, -1, attn.head_dim).transpose(1, 2)
        # the rotation is elementwise: queries and keys in one call (their key half left empty)
        # give the same bits with half the small ops
        heads = query.shape[2]
        both = torch.cat((query, key), 2).transpose(1, 2)  # [N, H + Hkv, 1, D]
        both, _ = self.rope(both, both[:, :0], cos, sin)
        query, key = both[:, :heads], both[:, heads:]  # [N, H, 1, D], [N, Hkv, 1, D]
        key, value = self.cache.layers[layer].update(key, value)  # [N, Hkv, T + t, D]
        out, _ = self.attention(
            attn,
            query,
            key,
            value,
            mask,
            dropout=0.0 if not attn.training else attn.attention_dropout,
            scaling=attn.scaling,
            sliding_window=getattr(attn, "sliding_window", None),
            position_ids=text_positions,
        )
        return _linear(attn.o_proj, out.reshape(n, q_len, -1).contiguous())  # [N, 1, hidden]

    def __call__(self, tokens: Tensor) -> Tensor:
        t = self.step
        self.step += 1
        mask = self.mask[..., : self.prompt + t] if self.padded else None  # [N, 1, 1, T + t]
        hidden = self.text.embed_tokens(tokens)  # [N, 1, hidden]
        cos, sin = self.cos[:, t : t + 1], self.sin[:, t : t + 1]  # [N, 1, head_dim]
        text_positions = None if self.text_positions is None else self.text_positions[..., t : t + 1]
        for index, layer in enumerate(self.text.layers):
            residual = hidden
            hidden = _norm(layer.input_layernorm, hidden)
            hidden = residual + self._attend(layer.self_attn, hidden, cos, sin, index, mask, text_positions)
            residual = hidden
            mlp, hidden = layer.mlp, _norm(layer.post_attention_layernorm, hidden)
            gated = mlp.act_fn(_linear(mlp.gate_proj, hidden)) * _linear(mlp.up_proj, hidden)
            hidden = residual + _linear(mlp.down_proj, gated)
        hidden = _norm(self.text.norm, hidden)
        return self.head(hidden)[:, -1]  # [N, V]
