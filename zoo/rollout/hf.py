"""Everything specific to Hugging Face ``generate``: `HFEngine`, its seeded sampling
(`SeededSampling`), the KV cache expansion (`expand_cache`) and prefix-shared generation
(`generate_shared`)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from transformers import LogitsProcessor
from transformers.cache_utils import DynamicCache, StaticCache, StaticLayer

from zoo.rollout.engine import Prompts, RolloutEngine, Sampling
from zoo.rollout.progress import SamplingProgress
from zoo.rollout.seeds import row_uniforms, sample_tokens
from zoo.sharding import unsharded


class HFEngine(RolloutEngine):
    """Hugging Face ``generate`` on the policy's own model (under FSDP2 gathered once per rollout),
    with seeded per-row sampling, suppressed special tokens and prefix sharing; the policy's
    ``share_prefix``, ``cache_implementation`` and ``compile_decode`` settings apply. It shares the
    policy's weights, so there is nothing to sync or offload."""

    def sync_weights(self, policy) -> None:
        return None  # generate runs on the policy's own (current) weights

    def offload(self) -> None:
        return None  # no memory of its own

    def generate(self, prompts: Prompts, n: int, sampling: Sampling) -> Tensor:
        policy = self.policy
        batch = prompts.batch
        prompt_length = batch.tensors["input_ids"].shape[1]
        config = policy.generation_config(sampling.max_new_tokens)
        processors = []
        if not sampling.greedy:
            processors = [
                SeededSampling(sampling.seeds, prompt_length, sampling.temperature, sampling.top_p, sampling.banned_ids)
            ]
            # SeededSampling masks them with a mask built once; generate's own suppression runs
            # isin over the vocabulary at every step (28 ms per token at 151,936 entries, 32 rows)
            config.suppress_tokens = None
        processors.append(SamplingProgress(prompt_length, sampling.max_new_tokens))  # a line every 10 s
        shared = policy.share_prefix if sampling.share_prefix is None else sampling.share_prefix
        model = policy.model
        was_training = model.training
        model.eval()
        try:
            with unsharded(model):
                if shared:
                    out = generate_shared(
                        model, batch.tensors, batch.media_keys, n, config, logits_processor=processors
                    )
                else:
                    inputs = batch.select([b for b in range(batch.size) for _ in range(n)])
                    out = model.generate(**inputs, generation_config=config, logits_processor=processors)
        finally:
            model.train(was_training)
        return out[:, prompt_length:]  # [N, L]


class SeededSampling(LogitsProcessor):
    """A ``generate`` logits processor that turns greedy decoding into seeded sampling: it draws
    each row's token from the softmax of its scores (banned ids removed, divided by the
    temperature, cut to the top-p nucleus) with the row's seeded uniform (`zoo.rollout.seeds`), and
    leaves that token the only finite score for the greedy pick.

    Args:
        seeds: One int64 seed per row, ``[N]``.
        prompt_length: Length of the (padded) prompt, so positions count generated tokens only.
        temperature: Divides the logits.
        top_p: Nucleus threshold (1.0 keeps the full distribution).
        banned_ids: Token ids never drawn.
    """

    def __init__(
        self,
        seeds: Tensor,
        prompt_length: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        banned_ids: Sequence[int] | None = None,
    ):
        self.seeds = seeds
        self.prompt_length = prompt_length
        self.temperature = temperature
        self.top_p = top_p
        self.banned_ids = torch.tensor(list(banned_ids or ()), dtype=torch.long)
        self.banned = None  # [V] bool, built at the first call (the vocabulary size is known there)

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if self.banned is None or self.banned.shape[0] != scores.shape[-1] or self.banned.device != scores.device:
            self.banned = torch.zeros(scores.shape[-1], dtype=torch.bool, device=scores.device)
            self.banned[self.banned_ids.to(scores.device)] = True
        position = input_ids.shape[1] - self.prompt_length
        uniforms = row_uniforms(self.seeds.to(scores.device), position)  # [N]
        tokens = sample_tokens(scores, uniforms, self.temperature, self.top_p, self.banned)  # [N]
        return torch.full_like(scores, float("-inf")).scatter_(-1, tokens[:, None], 0.0)  # [N, V]


def expand_cache(cache, repeats: int) -> None:
    """Repeat every layer's keys and values ``repeats`` times along the batch, in place: row ``b``
    becomes rows ``b * repeats ... (b + 1) * repeats - 1``. A static layer keeps a fixed address for
    ``torch.compile``."""
    for layer in cache.layers:
        if not isinstance(layer, StaticLayer):
            layer.batch_repeat_interleave(repeats)
        elif layer.is_initialized:
            layer.keys, layer.values = (t.repeat_interleave(repeats, dim=0) for t in (layer.keys, layer.values))
            layer.batch_size *= repeats
            torch._dynamo.mark_static_address(layer.keys)
            torch._dynamo.mark_static_address(layer.values)


def generate_shared(
    model: nn.Module, inputs: dict[str, Tensor], media_keys: set[str], repeats: int, generation_config, **kwargs
) -> Tensor:
    """``model.generate`` on every prompt repeated ``repeats`` times, with the prompts encoded only
    once.

    The prompts minus their last token (media, vision / audio encoders and all) run through
    ``model`` once, B rows; the cache is repeated (`expand_cache`) and ``generate`` continues the N
    rows from the last prompt token. Position ids (Qwen's 3D rope ones too) are computed once, as
    ``generate`` would, and repeated, so no per-row model state (such as Qwen's ``rope_deltas``) is
    read while decoding.

    Args:
        model: A Hugging Face generative model (or one exposing the same ``forward`` / ``generate``
            / ``_prepare_position_ids_for_generation``).
        inputs: Processor-style inputs of the B prompts, left padded.
        media_keys: Keys of ``inputs`` that only the prefill takes (pixel values, grids, audio
            features).
        repeats: G.
        generation_config: ``generate`` settings; ``cache_implementation="static"`` prefills into a
            static cache sized for the prompt and ``max_new_tokens``.
        **kwargs: More ``generate`` arguments (``logits_processor``).

    Returns:
        Prompt + completion ids ``[N, T + L]``, as ``generate`` returns them.
    """
    ids = inputs["input_ids"]  # [B, T]
    tokens = {k: v for k, v in inputs.items() if k not in media_keys and v.shape == ids.shape}  # ids, masks, types
    media = {k: v for k, v in inputs.items() if k not in tokens}
    generation_config = copy.copy(generation_config)  # the cache is made here: generate must not make one
    static, generation_config.cache_implementation = generation_config.cache_implementation == "static", None
    text_config = model.config.get_text_config(decoder=True)
    if static:  # never shorter than the last one, as generate does, so a compiled decoder is not rebuilt
        length = max(ids.shape[1] + generation_config.max_new_tokens, getattr(model, "_previous_max_cache_length", 0))
        model._previous_max_cache_length = length
    cache = StaticCache(config=text_config, max_cache_len=length) if static else DynamicCache(config=text_config)
    # the last prompt token is left to generate, which needs an uncached token to give the first
    # logits
    prefill = {k: v[:, :-1] for k, v in tokens.items()} | media  # [B, T - 1] and the media
    decode = {k: v.repeat_interleave(repeats, dim=0) for k, v in tokens.items()}  # [N, T]
    if "position_ids" in inspect.signature(model.forward).parameters:
        positions = model._prepare_position_ids_for_generation(ids, dict(inputs))  # [..., B, T]
        prefill["position_ids"] = positions[..., :-1]
        decode["position_ids"] = positions.repeat_interleave(repeats, dim=-2)
    model(**prefill, cache=cache, use_cache=True, logits_to_keep=1)
    expand_cache(cache, repeats)
    return model.generate(**decode, cache=cache, generation_config=generation_config, **kwargs)
