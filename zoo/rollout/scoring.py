"""The scores of sampled tokens under a model: one forward pass over prompt + completion, then the
log-prob, entropy and greedy flag of each completion token.

Two paths give the same numbers. The full-logits path takes the model's ``[n, L, V]`` logits
(`logprobs.token_log_probs`). The chunked path keeps the model from applying its output head: it
takes the final hidden states ``[n, L, D]`` and applies the head a chunk of tokens at a time
(`logprobs.chunked_token_scores`), so no full-vocabulary float32 tensor the size of the micro-batch
is ever held, in the forward or the backward.

Either path can take the prompts from a `SharedPrefix`: each distinct prompt (minus its last token)
runs once into a KV cache, which is indexed out to the rows (differentiably, so the rows' gradients
add up in the one prompt pass), and the rows' forward covers only the last prompt token and the
completion.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers.cache_utils import DynamicCache

from zoo.rollout.logprobs import chunked_token_scores, token_log_probs


class HeadBypass(nn.Module):
    """Stands in for the output head during one forward: returns the hidden states it is given,
    and keeps the head's parameters as they were at that moment (gathered, under FSDP2)."""

    def __init__(self, head: nn.Linear):
        super().__init__()
        self.__dict__["head"] = head  # not a submodule: its parameters stay registered where they are
        self.weight: Tensor | None = None
        self.bias: Tensor | None = None

    def forward(self, hidden: Tensor) -> Tensor:
        self.weight, self.bias = self.head.weight, self.head.bias
        return hidden


def chunkable_head(model: nn.Module) -> nn.Linear | None:
    """The model's output head when the chunked path can stand in for it: a plain linear layer
    whose logits the model returns unchanged (no final soft-capping or logit scale), in a model
    that FSDP2 does not shard (it frees the gathered head after the forward); else None."""
    from torch.distributed.fsdp import FSDPModule

    if isinstance(model, FSDPModule):
        return None
    head = model.get_output_embeddings()
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    rescaled = getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", 1.0) != 1.0
    return head if type(head) is nn.Linear and not rescaled else None


@contextmanager
def head_bypassed(model: nn.Module, head: nn.Linear) -> Iterator[HeadBypass]:
    """Within the context the model's ``logits`` are its final hidden states, and the yielded
    `HeadBypass` holds the head's parameters once a forward has run."""
    owners = [(module, name) for module in model.modules() for name, child in module.named_children() if child is head]
    bypass = HeadBypass(head)
    for module, name in owners:
        setattr(module, name, bypass)
    try:
        yield bypass
    finally:
        for module, name in owners:
            setattr(module, name, head)


@dataclass
class SharedPrefix:
    """The prompts of a scoring pass, run once each before the rows' forward.

    Attributes:
        inputs: Model inputs of the distinct prompts minus their last token, media included, ``[b,
            P - 1]``.
        rows: For each of the ``n`` rows, its prompt's position among the ``b``, ``[n]``.
    """

    inputs: dict
    rows: Tensor

    def cache(self, model: nn.Module) -> DynamicCache:
        """The prompts' KV cache, ``n`` rows (in the autograd graph when gradients are on)."""
        cache = DynamicCache(config=model.config.get_text_config(decoder=True))
        model(**self.inputs, cache=cache, use_cache=True, logits_to_keep=1)
        cache.batch_select_indices(self.rows.to(self.inputs["input_ids"].device))
        return cache


def split_prefix(
    inputs: dict, length: int, prompt_of_row: list[int], prompts: dict, positions: Tensor | None
) -> tuple[dict, SharedPrefix] | None:
    """Inputs of prompt + completion rows split into a `SharedPrefix` and the rows' rest: the last
    prompt token and the ``length`` completion columns, with the full attention mask (cached
    columns included) and the position ids ``positions`` sliced alike. None when no prompt has two
    rows, or the prompts are a single column.

    Args:
        inputs: The rows' model inputs: ``[n, P + length]`` token tensors, and media.
        length: Completion columns.
        prompt_of_row: Each row's prompt.
        prompts: Processor inputs of the distinct prompts, in order of first appearance; the
            prefix takes their media (any tensor that is not one of the rows' token tensors).
        positions: Position ids ``[..., n, P + length]`` the model's own forward would give the
            rows, or None when it numbers positions by cache length.
    """
    ids = inputs["input_ids"]  # [n, P + length]
    n, width = ids.shape
    distinct = list(dict.fromkeys(prompt_of_row))
    start = width - length - 1  # the last prompt token's column
    if len(distinct) == n or start < 1:
        return None
    first = [prompt_of_row.index(p) for p in distinct]
    media_keys = {k for k in prompts if k not in inputs or inputs[k].shape != (n, width)}
    tokens = {k: v for k, v in inputs.items() if k not in media_keys and v.shape == (n, width)}
    prefix = {k: v[first, :start] for k, v in tokens.items()} | {k: prompts[k] for k in media_keys}  # [b, P - 1]
    rest = {k: v[:, start:] for k, v in tokens.items()} | {"attention_mask": inputs["attention_mask"]}
    if positions is not None:
        prefix["position_ids"] = positions[..., first, :start]
        rest["position_ids"] = positions[..., start:]  # [..., n, 1 + length]
    index = {p: i for i, p in enumerate(distinct)}
    return rest, SharedPrefix(prefix, torch.tensor([index[p] for p in prompt_of_row]))


def run_scored(
    model: nn.Module, inputs: dict, length: int, prefix: SharedPrefix | None = None, keep: Tensor | None = None
) -> Tensor:
    """The model's output at the positions that predict the last ``length`` tokens of ``inputs``,
    ``[n, length, ...]``; with ``prefix``, ``inputs`` continue its cache; with ``keep``, the
    outputs at those positions of the one packed row, ``[1, K, ...]``."""
    if keep is not None:
        out = model(**inputs, logits_to_keep=keep, use_cache=False).logits  # [1, K, ...]
        return out if out.shape[1] == len(keep) else out[:, keep]
    if prefix is None:
        out = model(**inputs, logits_to_keep=length + 1, use_cache=False)
    else:
        out = model(**inputs, cache=prefix.cache(model), use_cache=True, logits_to_keep=length + 1)
    # some models (Qwen2-Audio) ignore logits_to_keep and return every position: keep the last
    return out.logits[:, -(length + 1) : -1]


def score_tokens(
    model: nn.Module,
    inputs: dict,
    ids: Tensor,
    mask: Tensor,
    temperature: float = 1.0,
    banned: Tensor | None = None,
    chunk: int | None = None,
    entropy: bool = True,
    prefix: SharedPrefix | None = None,
    keep: Tensor | None = None,
    greedy: bool = True,
) -> dict[str, Tensor | None]:
    """Scores of the completion tokens ``ids``, the last ``L`` columns of ``inputs`` (or, with
    ``keep``, the tokens after the positions ``keep`` of a packed row, `zoo.rollout.packing`).

    Args:
        model: A Hugging Face causal or multimodal LM (anything with ``get_output_embeddings`` and
            a ``logits_to_keep`` argument, or that ignores it and returns every position).
        inputs: Its inputs for ``n`` rows of prompt + completion.
        ids: The completion tokens, ``[n, L]``.
        mask: ``[n, L]`` bool, the tokens that count; the scores elsewhere are 0 (False).
        temperature: The sampling temperature.
        banned: Tokens sampling suppressed, ``[V]`` bool, or None.
        chunk: Tokens whose logits the chunked path holds at once; None takes the full-logits path,
            as does a model whose head the chunked path cannot stand in for (`chunkable_head`).
        entropy: False leaves the entropy out (None).
        prefix: The prompts, run once into the cache that ``inputs`` continue (`split_prefix`);
            None: ``inputs`` hold whole rows.
        keep: Positions of the model's one (packed) row whose outputs predict ``ids`` ``[1, K]``,
            ``[K]``; None takes the ``L + 1`` last but one positions of every row.
        greedy: False leaves the greedy flags out (None).

    Returns:
        ``logps``, ``entropy`` and ``greedy`` (the token is the most likely unbanned one), ``[n,
        L]`` each.
    """
    head = chunkable_head(model) if chunk is not None else None
    if head is None:
        logits = run_scored(model, inputs, ids.shape[1], prefix, keep)  # [n, L, V]
        logps, ent = token_log_probs(logits, ids, temperature, banned)  # [n, L]
        return {
            "logps": logps.masked_fill(~mask, 0.0),
            "entropy": ent.masked_fill(~mask, 0.0) if entropy else None,
            "greedy": _greedy_flags(logits, ids, mask, banned) if greedy else None,
        }
    with head_bypassed(model, head) as bypass:
        hidden = run_scored(model, inputs, ids.shape[1], prefix, keep)  # [n, L, D]
    logps, ent, flags = chunked_token_scores(
        hidden, bypass.weight, ids, bypass.bias, temperature, banned, chunk, mask, entropy, greedy
    )  # [n, L]
    return {"logps": logps, "entropy": ent, "greedy": flags}


def _greedy_flags(logits: Tensor, ids: Tensor, mask: Tensor, banned: Tensor | None) -> Tensor:
    """``[n, L]`` bool: ``ids`` is the most likely unbanned token of ``logits`` ``[n, L, V]``,
    within ``mask``."""
    unbanned = logits if banned is None else logits.masked_fill(banned, float("-inf"))
    return (unbanned.argmax(dim=-1) == ids) & mask
