"""The default rollout engine, `HFEngine`, on the policy's own Hugging Face model: zoo's decoding
loop (`zoo.rollout.decode`) or Hugging Face ``generate`` with seeded sampling as a logits processor
(`SeededSampling`) and prefix-shared generation (`generate_shared`)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from transformers import LogitsProcessor

from zoo.rollout.decode import decode, prefill
from zoo.rollout.engine import Prompts, RolloutEngine, Sampling
from zoo.rollout.progress import SamplingProgress
from zoo.rollout.seeds import row_uniforms, sample_tokens
from zoo.sharding import unsharded


class HFEngine(RolloutEngine):
    """Sampling on the policy's own model (under FSDP2 gathered once per rollout), with seeded
    per-row sampling, suppressed special tokens and prefix sharing; the policy's ``share_prefix``,
    ``cache_implementation`` and ``compile_decode`` settings apply. It shares the policy's weights,
    so there is nothing to sync or offload.

    Args:
        loop: ``zoo`` decodes with zoo's own loop (`zoo.rollout.decode`: one forward per token on a
            cache written in place), each step through `zoo.rollout.lean_step.LeanStep` where it
            supports the model; ``forward`` the same loop through the model's own forward at every
            step; ``generate`` with Hugging Face ``generate`` and logits processors. All give the
            same tokens for the same seeds; ``zoo`` does the least work per token.
    """

    LOOPS = ("zoo", "forward", "generate")

    def __init__(self, loop: str = "zoo"):
        if loop not in self.LOOPS:
            raise ValueError(f"loop must be one of {self.LOOPS}, not {loop!r}")
        self.loop = loop

    def sync_weights(self, policy) -> None:
        return None  # sampling runs on the policy's own (current) weights

    def offload(self) -> None:
        return None  # no memory of its own

    def generate(self, prompts: Prompts, n: int, sampling: Sampling) -> Tensor:
        policy = self.policy
        batch = prompts.batch
        shared = policy.share_prefix if sampling.share_prefix is None else sampling.share_prefix
        tensors, repeats = (
            (batch.tensors, n) if shared else (batch.select([b for b in range(batch.size) for _ in range(n)]), 1)
        )
        config = policy.generation_config(sampling.max_new_tokens)
        progress = SamplingProgress(batch.tensors["input_ids"].shape[1], sampling.max_new_tokens)  # a line every 10 s
        model = policy.model
        was_training = model.training
        model.eval()
        try:
            with unsharded(model):
                if self.loop != "generate":
                    lean = self.loop == "zoo"
                    return decode(model, dict(tensors), batch.media_keys, repeats, sampling, config, progress, lean)
                return self._generate(model, tensors, batch.media_keys, repeats, sampling, config, progress, shared)
        finally:
            model.train(was_training)

    @staticmethod
    def _generate(model, tensors, media_keys, repeats, sampling, config, progress, shared) -> Tensor:
        """Hugging Face ``generate``: sampling as a logits processor (`SeededSampling`)."""
        prompt_length = tensors["input_ids"].shape[1]
        processors = [progress]
        if not sampling.greedy:
            seeded = SeededSampling(
                sampling.seeds, prompt_length, sampling.temperature, sampling.top_p, sampling.banned_ids
            )
            processors.insert(0, seeded)
            # SeededSampling masks them with a mask built once; generate's own suppression runs
            # isin over the vocabulary at every step (28 ms per token at 151,936 entries, 32 rows)
            config.suppress_tokens = None
        if shared:
            out = generate_shared(model, tensors, media_keys, repeats, config, logits_processor=processors)
        else:
            out = model.generate(**tensors, generation_config=config, logits_processor=processors)
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
    generation_config = copy.copy(generation_config)  # the cache is made here: generate must not make one
    cache, decode_inputs = prefill(model, inputs, media_keys, repeats, generation_config)
    generation_config.cache_implementation = None
    return model.generate(**decode_inputs, cache=cache, generation_config=generation_config, **kwargs)
