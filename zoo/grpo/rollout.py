"""Rollouts: G sampled completions for each of B prompts, and the model inputs to score them again.

Row ``n`` of every ``[N, ...]`` tensor belongs to prompt ``n // G`` (groups are contiguous).

Sampling is seeded per row: token ``t`` of row ``n`` is drawn with Gumbel-max noise that is a hash of
(the row's seed, t, token id), computed with integer arithmetic that gives the same bits on every device.
A row's completion therefore depends only on its example and the step, never on which rank or batch
position it landed in, so a global batch gives the same rollouts on 1 process or on N.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper
from transformers.cache_utils import DynamicCache, StaticCache, StaticLayer

from zoo.batch import PromptBatch


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN, _MIX1, _MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shr(x: Tensor, k: int) -> Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def splitmix64(x: Tensor) -> Tensor:
    """The splitmix64 finaliser on int64 tensors (multiplication wraps modulo 2**64)."""
    x = x + _GOLDEN
    x = (x ^ _shr(x, 30)) * _MIX1
    x = (x ^ _shr(x, 27)) * _MIX2
    return x ^ _shr(x, 31)


def row_seeds(keys: list[str], seed: int) -> Tensor:
    """One int64 seed per row from a string key per row and a base seed (the same in every process)."""
    digests = (hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8] for key in keys)
    return torch.tensor([int.from_bytes(d, "little", signed=True) for d in digests], dtype=torch.long)


def example_row_seeds(examples: list, num_generations: int, seed: int) -> Tensor:
    """Seeds of rows ``(b, g)``: from each example's ``uid`` (its batch position when it has none) and g."""
    keys = [f"{ex.uid or b}:{g}" for b, ex in enumerate(examples) for g in range(num_generations)]
    return row_seeds(keys, seed)


def gumbel_noise(seeds: Tensor, position: int, vocab: int) -> Tensor:
    """Gumbel(0, 1) noise ``[N, V]`` for decoding ``position`` of rows with ``seeds`` (``[N]`` int64)."""
    base = splitmix64(seeds ^ splitmix64(torch.full_like(seeds, position)))[:, None]  # [N, 1]
    bits = splitmix64(base + torch.arange(1, vocab + 1, device=seeds.device)[None, :] * _GOLDEN)  # [N, V]
    uniform = (_shr(bits, 11).double() + 0.5) / float(1 << 53)  # (0, 1)
    return -torch.log(-torch.log(uniform))


class SeededSampling(LogitsProcessor):
    """A ``generate`` logits processor that turns greedy decoding into seeded sampling: temperature and
    top-p filter the scores, then the argmax of ``scores + gumbel`` is a sample from the filtered softmax.

    Args:
        seeds: One int64 seed per row, ``[N]``.
        prompt_length: Length of the (padded) prompt, so positions count generated tokens only.
        temperature: Divides the logits.
        top_p: Nucleus threshold (1.0 keeps the full distribution).
    """

    def __init__(self, seeds: Tensor, prompt_length: int, temperature: float = 1.0, top_p: float = 1.0):
        self.seeds, self.prompt_length = seeds, prompt_length
        self.warpers = [TemperatureLogitsWarper(temperature)] + ([TopPLogitsWarper(top_p)] if top_p < 1 else [])

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        position = input_ids.shape[1] - self.prompt_length
        noise = gumbel_noise(self.seeds.to(scores.device), position, scores.shape[-1])
        return scores + noise.to(scores.dtype)


def expand_cache(cache, repeats: int) -> None:
    """Repeat every layer's keys and values ``repeats`` times along the batch, in place: row ``b`` becomes rows
    ``b * repeats ... (b + 1) * repeats - 1``. A static layer keeps a fixed address for ``torch.compile``."""
    for layer in cache.layers:
        if not isinstance(layer, StaticLayer):
            layer.batch_repeat_interleave(repeats)
        elif layer.is_initialized:
            layer.keys, layer.values = (t.repeat_interleave(repeats, dim=0) for t in (layer.keys, layer.values))
            layer.batch_size *= repeats
            torch._dynamo.mark_static_address(layer.keys)
            torch._dynamo.mark_static_address(layer.values)


def generate_shared(model: nn.Module, inputs: dict[str, Tensor], media_keys: set[str], repeats: int,
                    generation_config, **kwargs) -> Tensor:
    """``model.generate`` on every prompt repeated ``repeats`` times, with the prompts encoded only once.

    The prompts minus their last token (media, vision / audio encoders and all) run through ``model`` once,
    B rows; the cache is repeated (`expand_cache`) and ``generate`` continues the N rows from the last prompt
    token. Position ids (Qwen's 3D rope ones too) are computed once, as ``generate`` would, and repeated, so
    no per-row model state (such as Qwen's ``rope_deltas``) is read while decoding.

    Args:
        model: A Hugging Face generative model (or one exposing the same ``forward`` / ``generate`` /
            ``_prepare_position_ids_for_generation``).
        inputs: Processor-style inputs of the B prompts, left padded.
        media_keys: Keys of ``inputs`` that only the prefill takes (pixel values, grids, audio features).
        repeats: G.
        generation_config: ``generate`` settings; ``cache_implementation="static"`` prefills into a static
            cache sized for the prompt and ``max_new_tokens``.
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
    # the last prompt token is left to generate, which needs an uncached token to give the first logits
    prefill = {k: v[:, :-1] for k, v in tokens.items()} | media  # [B, T - 1] and the media
    decode = {k: v.repeat_interleave(repeats, dim=0) for k, v in tokens.items()}  # [N, T]
    if "position_ids" in inspect.signature(model.forward).parameters:
        positions = model._prepare_position_ids_for_generation(ids, dict(inputs))  # [..., B, T]
        prefill["position_ids"] = positions[..., :-1]
        decode["position_ids"] = positions.repeat_interleave(repeats, dim=-2)
    model(**prefill, cache=cache, use_cache=True, logits_to_keep=1)
    expand_cache(cache, repeats)
    return model.generate(**decode, cache=cache, generation_config=generation_config, **kwargs)


def completion_mask(ids: Tensor, eos_ids: list[int]) -> tuple[Tensor, Tensor]:
    """Mask of the tokens up to and including the first EOS, and which rows never emitted one.

    Args:
        ids: Generated tokens, ``[N, L]``.
        eos_ids: Token ids that end a completion.

    Returns:
        ``mask`` ``[N, L]`` (bool) and ``truncated`` ``[N]`` (bool).
    """
    is_eos = torch.isin(ids, torch.tensor(eos_ids, device=ids.device))  # [N, L]
    truncated = ~is_eos.any(dim=1)  # [N]
    first = torch.where(truncated, ids.shape[1], is_eos.int().argmax(dim=1))  # [N]
    mask = torch.arange(ids.shape[1], device=ids.device)[None, :] <= first[:, None]  # [N, L]
    return mask, truncated


@dataclass
class Rollout:
    """Sampled completions of a batch of prompts.

    Attributes:
        examples: The B prompts' examples.
        prompts: Their encoding (B rows).
        num_generations: G, completions per prompt.
        completion_ids: ``[N, L]``; positions after the first EOS hold an EOS id, so they stay scorable.
        completion_mask: ``[N, L]`` bool, the tokens that count (through the first EOS).
        truncated: ``[N]`` bool, rows that hit ``max_new_tokens`` without an EOS.
        completions: N decoded texts, without the EOS.
        temperature: Sampling temperature; log-probs are taken at the same temperature.
    """

    examples: list
    prompts: PromptBatch
    num_generations: int
    completion_ids: Tensor
    completion_mask: Tensor
    truncated: Tensor
    completions: list[str]
    temperature: float = 1.0

    @property
    def size(self) -> int:
        """N = B * G."""
        return self.completion_ids.shape[0]

    def example(self, row: int):
        return self.examples[row // self.num_generations]

    def completion_columns(self, rows: Tensor) -> int:
        """Completion columns ``rows`` need: through the last counted token of the longest of them."""
        used = torch.nonzero(self.completion_mask[rows].any(0))  # [columns used, 1]
        return int(used.max()) + 1 if len(used) else 1

    def model_inputs(self, rows: Tensor, trim: bool = False) -> dict[str, Tensor]:
        """Prompt + completion inputs for ``rows`` (``[n]`` row indices), ready for a forward pass.

        ``trim`` leaves out the prompt columns that are padding in every one of the rows and the completion
        columns after `completion_columns`: a shorter forward pass whose kept positions see the same tokens
        (left padding is masked out, and the cut tail comes after every scored token).
        """
        prompt = self.prompts.select((rows // self.num_generations).tolist())
        n, p = prompt["input_ids"].shape
        length = self.completion_columns(rows) if trim else self.completion_ids.shape[1]
        start = int(prompt["attention_mask"].any(0).int().argmax()) if trim else 0  # first column in use
        ids, mask = self.completion_ids[rows, :length], self.completion_mask[rows, :length]  # [n, length]
        for key, value in prompt.items():
            if key not in self.prompts.media_keys and value.dim() == 2 and value.shape == (n, p):
                tail = {"input_ids": ids, "attention_mask": mask.to(value.dtype)}.get(key)
                if tail is None:  # e.g. mm_token_type_ids: completion tokens are text
                    tail = torch.zeros_like(ids, dtype=value.dtype)
                prompt[key] = torch.cat([value[:, start:], tail], dim=1)
        return prompt
