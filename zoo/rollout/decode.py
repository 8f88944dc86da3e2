"""zoo's own decoding loop (`decode`): one prefill per prompt, then one forward per token on a
cache written in place, each token drawn from the last position's logits by `zoo.rollout.seeds`.
It gives, token for token, what Hugging Face ``generate`` gives through
`zoo.rollout.hf.generate_shared` and `SeededSampling`, without ``generate``'s per-token work
(logits processors over the whole vocabulary, stopping criteria, the key / value concatenation of
every layer)."""

from __future__ import annotations

import inspect

import torch
from torch import Tensor, nn
from transformers.cache_utils import DynamicCache, StaticCache, StaticLayer

from zoo.rollout.engine import Sampling
from zoo.rollout.inplace import write_in_place
from zoo.rollout.lean_step import LeanStep
from zoo.rollout.progress import SamplingProgress
from zoo.rollout.seeds import sample_tokens, uniform_table


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


def prefill(model: nn.Module, inputs: dict[str, Tensor], media_keys: set[str], repeats: int, config):
    """Run the B prompts minus their last token (media and all) through ``model`` once, repeat the
    cache ``repeats`` times, and return it with the inputs ``generate`` would continue from (the
    ``[N, T]`` ids, masks, token types and position ids)."""
    ids = inputs["input_ids"]  # [B, T]
    tokens = {k: v for k, v in inputs.items() if k not in media_keys and v.shape == ids.shape}  # ids, masks, types
    media = {k: v for k, v in inputs.items() if k not in tokens}
    text_config = model.config.get_text_config(decoder=True)
    if config.cache_implementation == "static":  # never shorter than the last one: a compiled decoder is kept
        length = max(ids.shape[1] + config.max_new_tokens, getattr(model, "_previous_max_cache_length", 0))
        model._previous_max_cache_length = length
        cache = StaticCache(config=text_config, max_cache_len=length)
    else:
        cache = DynamicCache(config=text_config)
    # the last prompt token is left to the decoding loop, whose first forward gives the first logits
    first = {k: v[:, :-1] for k, v in tokens.items()} | media  # [B, T - 1] and the media
    decode = {k: v.repeat_interleave(repeats, dim=0) for k, v in tokens.items()}  # [N, T]
    if "position_ids" in inspect.signature(model.forward).parameters:
        positions = model._prepare_position_ids_for_generation(ids, dict(inputs))  # [..., B, T]
        first["position_ids"] = positions[..., :-1]
        decode["position_ids"] = positions.repeat_interleave(repeats, dim=-2)
    model(**first, cache=cache, use_cache=True, logits_to_keep=1)
    expand_cache(cache, repeats)
    return cache, decode


def start(model: nn.Module, inputs: dict[str, Tensor], media_keys: set[str], repeats: int, config, max_new_tokens: int):
    """`prefill`, then what the decoding steps continue from: ``(lm, cache, kwargs)``, the model
    the steps run, its cache (a dynamic one written in place, with room for ``max_new_tokens``)
    and the step inputs (``[N, T]`` ids, masks, positions, the cache, ``logits_to_keep``)."""
    cache, kwargs = prefill(model, inputs, media_keys, repeats, config)
    # a spliced LM (zoo.spliced) embeds media in its own forward; past the prefill it is its text LM
    lm = model if hasattr(model, "prepare_inputs_for_generation") else model.lm
    if isinstance(cache, DynamicCache):
        write_in_place(cache, kwargs["input_ids"].shape[1] + max_new_tokens)
    kwargs.update(cache=cache, use_cache=True)
    if "logits_to_keep" in inspect.signature(lm.forward).parameters:
        kwargs["logits_to_keep"] = 1
    return lm, cache, kwargs


@torch.no_grad()
def decode(
    model: nn.Module,
    inputs: dict[str, Tensor],
    media_keys: set[str],
    repeats: int,
    sampling: Sampling,
    config,
    progress: SamplingProgress | None = None,
    lean: bool = True,
) -> Tensor:
    """Completions ``[N, L]`` of the B prompts of ``inputs``, each repeated ``repeats`` times: the
    tokens ``generate_shared`` returns after the prompt, for the same seeds.

    Rows that ended (an EOS) are carried on, padded with the first EOS id, so every forward has
    the batch ``generate`` has (a smaller batch could round differently); the loop stops when all
    rows ended or at ``max_new_tokens``.

    Args:
        model: A Hugging Face generative model (or one exposing ``forward`` and, itself or as
            ``lm``, ``prepare_inputs_for_generation``).
        inputs: Processor-style inputs of the B prompts, left padded.
        media_keys: Keys of ``inputs`` only the prefill takes.
        repeats: G.
        sampling: Temperature, top-p, greedy, seeds, EOS and banned ids, ``max_new_tokens``.
        config: The policy's ``GenerationConfig`` (cache implementation, compilation).
        progress: Reports the tokens sampled so far during a long rollout.
        lean: Decode with `LeanStep` where it supports the model (the same logits, less work).
    """
    lm, cache, kwargs = start(model, inputs, media_keys, repeats, config, sampling.max_new_tokens)
    capacity = kwargs["input_ids"].shape[1] + sampling.max_new_tokens
    step = lm.get_compiled_call(config.compile_config) if lm._valid_auto_compile_criteria(kwargs, config) else lm
    lean_step = LeanStep.of(lm, kwargs, cache, capacity) if lean and step is lm else None
    tokens = kwargs.pop("input_ids")[:, -1:]  # [N, 1] the last prompt token
    banned = None  # [V] bool, built at the first step (the logits give V)
    eos = torch.tensor(sampling.eos_ids, device=tokens.device)
    unfinished = torch.ones(len(tokens), dtype=torch.bool, device=tokens.device)  # [N]
    uniforms = None if sampling.greedy else uniform_table(sampling.seeds.to(tokens.device), sampling.max_new_tokens)
    out = []
    for position in range(sampling.max_new_tokens):
        if lean_step is not None:
            logits = lean_step(tokens).float()  # [N, V]
        else:
            step_inputs = lm.prepare_inputs_for_generation(
                tokens, next_sequence_length=1, is_first_iteration=position == 0, **kwargs
            )
            outputs = step(**step_inputs, return_dict=True)
            kwargs = lm._update_model_kwargs_for_generation(outputs, kwargs)
            logits = outputs.logits[:, -1].float()  # [N, V]
        if banned is None:
            banned = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
            banned[list(sampling.banned_ids)] = True
        if uniforms is None:
            tokens = logits.masked_fill(banned, float("-inf")).argmax(-1)  # [N]
        else:
            tokens = sample_tokens(logits, uniforms[:, position], sampling.temperature, sampling.top_p, banned)  # [N]
        tokens = tokens.where(unfinished, eos[0])[:, None]  # [N, 1]
        out.append(tokens)
        unfinished &= ~torch.isin(tokens[:, 0], eos)
        if progress is not None:
            progress.report(position + 1, len(tokens))
        if not unfinished.any():
            break
    return torch.cat(out, 1)  # [N, L]
