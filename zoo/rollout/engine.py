"""Rollout engines: what turns encoded prompts into sampled completion tokens for
`zoo.PolicyModule.sample`.

The policy encodes the prompts, checks and decodes what the engine returns, builds the `Rollout` and
recomputes every log-prob the loss uses; an engine only samples token ids. `HFEngine` (the default,
`zoo.rollout.hf`) decodes on the policy's own model (`zoo.rollout.decode`). Another engine (vLLM,
SGLang) is a `RolloutEngine` subclass named in the policy's ``engine`` option; the contract it must
meet is in docs/grpo.md ("Rollout engines").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from zoo.batch import PromptBatch
from zoo.rollout.rollout import completion_mask


@dataclass(frozen=True)
class Prompts:
    """The B prompts of one rollout.

    Attributes:
        examples: Their `tasks.Example` (chat messages with inline media): what an engine with its
            own processor reads.
        batch: The policy's encoding of them (left padded): what the policy scores, and what
            `HFEngine` generates from.
    """

    examples: list
    batch: PromptBatch


@dataclass(frozen=True)
class Sampling:
    """How to sample one rollout.

    Attributes:
        max_new_tokens: Completion length limit.
        temperature: Softmax temperature (ignored when ``greedy``).
        top_p: Nucleus threshold; 1.0 samples the full distribution.
        greedy: Decode deterministically (evaluation).
        seeds: One int64 seed per row ``[N]`` (row ``b * n + g`` is sample g of prompt b), None when
            greedy. A row's noise should depend on its seed only, so a global batch samples alike on
            any number of ranks (`zoo.rollout.seeds`).
        eos_ids: Token ids that end a completion; the only stop condition besides
            ``max_new_tokens``.
        banned_ids: Token ids that must never be sampled (media placeholders, turn starts, padding).
        share_prefix: `HFEngine`: encode each prompt once for its n samples (None: the policy's
            setting); other engines may ignore it.
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False
    seeds: Tensor | None = None
    eos_ids: tuple[int, ...] = ()
    banned_ids: tuple[int, ...] = ()
    share_prefix: bool | None = None


class RolloutEngine(ABC):
    """Samples completions for a policy. The policy calls `bind` once its model is built, then, for
    each rollout, `sync_weights` (only when its weights changed since the last push), `generate`,
    and `offload`."""

    policy = None

    def bind(self, policy) -> None:
        """Attach to ``policy`` (a `zoo.PolicyModule` whose model is built): read its tokenizer,
        special ids and ``pretrained`` here, start a server, allocate caches."""
        self.policy = policy

    @abstractmethod
    def generate(self, prompts: Prompts, n: int, sampling: Sampling) -> Tensor | list[list[int]]:
        """``n`` completions of each prompt as token ids of the policy's tokenizer, ``[N, L]`` (L <=
        max_new_tokens) or N lists; row ``b * n + g`` is sample g of prompt b. A row stops after its
        first EOS id (kept) or at ``max_new_tokens``; log-probs are not returned (the policy
        recomputes them)."""

    @abstractmethod
    def sync_weights(self, policy) -> None:
        """Load ``policy``'s current weights (`full_weights` gives them). Called on every rank
        before a `generate` when the weights changed since the last call: before the first rollout,
        after each optimizer step, after a checkpoint is loaded."""

    @abstractmethod
    def offload(self) -> None:
        """Give back memory the training passes need (KV cache, a colocated engine's weights);
        called after each `generate`."""


def completion_ids(generated: Tensor | list[list[int]], rows: int, sampling: Sampling, engine: str, device) -> Tensor:
    """An engine's output as ``[N, L]`` ids, checked against the contract: ``rows`` rows, none
    longer than ``max_new_tokens``, a row without EOS only at the limit, no banned id before the
    first EOS. Lists are padded with EOS (each stopped at its EOS, so padding never ends a row
    early)."""
    eos = sampling.eos_ids[0]
    if not isinstance(generated, Tensor):
        width = max((len(r) for r in generated), default=0)
        generated = torch.tensor([list(r) + [eos] * (width - len(r)) for r in generated], dtype=torch.long)
        generated = generated.view(len(generated), width)
    ids = generated.to(device=device, dtype=torch.long)  # [N, L]
    mask, truncated = completion_mask(ids, list(sampling.eos_ids))
    problems = [
        (ids.dim() == 2 and len(ids) == rows, f"returned {tuple(ids.shape)} ids for {rows} rows"),
        (
            ids.shape[-1] <= sampling.max_new_tokens,
            f"returned {ids.shape[-1]} tokens, over max_new_tokens={sampling.max_new_tokens}",
        ),
        (
            not truncated.any() or ids.shape[-1] == sampling.max_new_tokens,
            "stopped a row without an EOS before max_new_tokens (the only stop conditions are EOS and the limit)",
        ),
        (
            not torch.isin(ids[mask], torch.tensor(sampling.banned_ids, dtype=torch.long, device=device)).any(),
            "sampled a banned token (media placeholder, turn start or padding)",
        ),
    ]
    for ok, message in problems:
        if not ok:
            raise ValueError(f"rollout engine {engine} {message}")
    return ids


@torch.no_grad()
def full_weights(policy) -> Iterator[tuple[str, Tensor]]:
    """The policy's weights as an inference engine loads them: ``(name, tensor)`` for every entry of
    the plain model's ``state_dict`` (the names ``save_pretrained`` writes), full tensors (FSDP2
    shards gathered: a collective, every rank must iterate), LoRA adapters merged into their base
    weights, in the dtype the parameters are stored in (the engine casts to its own)."""
    state = policy.model.state_dict()
    layers = {}
    if policy.lora is not None:
        from peft.tuners.tuners_utils import BaseTunerLayer

        layers = {n: m for n, m in policy.model.named_modules() if isinstance(m, BaseTunerLayer)}
    for name, value in state.items():
        owner, _, leaf = name.rpartition(".")
        if ".lora_" in name or owner.endswith(".base_layer") and owner[: -len(".base_layer")] in layers:
            continue
        yield name, _full(value)
    for name, layer in layers.items():
        weight = _full(state[f"{name}.base_layer.weight"])
        for adapter in layer.active_adapters:
            a = _full(state[f"{name}.lora_A.{adapter}.weight"])
            b = _full(state[f"{name}.lora_B.{adapter}.weight"])
            weight = weight + (b @ a * layer.scaling[adapter]).to(weight.dtype)  # [out, in]
        yield f"{name}.weight", weight
        if f"{name}.base_layer.bias" in state:
            yield f"{name}.bias", _full(state[f"{name}.base_layer.bias"])


def _full(tensor: Tensor) -> Tensor:
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
