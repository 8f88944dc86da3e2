"""The scores of sampled tokens under a model: one forward pass over prompt + completion, then the
log-prob, entropy and greedy flag of each completion token.

Two paths give the same numbers. The full-logits path takes the model's ``[n, L, V]`` logits
(`logprobs.token_log_probs`). The chunked path keeps the model from applying its output head: it
takes the final hidden states ``[n, L, D]`` and applies the head a chunk of tokens at a time
(`logprobs.chunked_token_scores`), so no full-vocabulary float32 tensor the size of the micro-batch
is ever held, in the forward or the backward.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import Tensor, nn

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


def score_tokens(
    model: nn.Module,
    inputs: dict,
    ids: Tensor,
    mask: Tensor,
    temperature: float = 1.0,
    banned: Tensor | None = None,
    chunk: int | None = None,
    entropy: bool = True,
    keep: Tensor | None = None,
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
        keep: Positions of the model's one (packed) row whose outputs predict ``ids`` ``[1, K]``,
            ``[K]``; None takes the ``L + 1`` last but one positions of every row.

    Returns:
        ``logps``, ``entropy`` and ``greedy`` (the token is the most likely unbanned one), ``[n,
        L]`` each.
    """
    head = chunkable_head(model) if chunk is not None else None
    if head is None:
        logits = _outputs(model, inputs, ids.shape[1], keep)
        logps, ent = token_log_probs(logits, ids, temperature, banned)  # [n, L]
        unbanned = logits if banned is None else logits.masked_fill(banned, float("-inf"))
        return {
            "logps": logps.masked_fill(~mask, 0.0),
            "entropy": ent.masked_fill(~mask, 0.0) if entropy else None,
            "greedy": (unbanned.argmax(dim=-1) == ids) & mask,
        }
    with head_bypassed(model, head) as bypass:
        hidden = _outputs(model, inputs, ids.shape[1], keep)
    logps, ent, greedy = chunked_token_scores(
        hidden, bypass.weight, ids, bypass.bias, temperature, banned, chunk, mask, entropy
    )  # [n, L]
    return {"logps": logps, "entropy": ent, "greedy": greedy}


def _outputs(model: nn.Module, inputs: dict, length: int, keep: Tensor | None) -> Tensor:
    """The model's ``logits`` output at the positions that predict the scored tokens: the ``length``
    before the last of each row, or the packed row's ``keep`` positions."""
    if keep is None:
        # some models (Qwen2-Audio) ignore logits_to_keep and return every position: keep the last
        return model(**inputs, logits_to_keep=length + 1, use_cache=False).logits[:, -(length + 1) : -1]
    out = model(**inputs, logits_to_keep=keep, use_cache=False).logits  # [1, K, ...]
    return out if out.shape[1] == len(keep) else out[:, keep]
