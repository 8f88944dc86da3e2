"""Token log-probs and entropy of sampled completions, from the policy's logits or, a chunk of
tokens at a time, from its final hidden states and output head: pure tensor math.

Shapes: n completion rows, L completion tokens, V vocabulary rows, D hidden width, M scored tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


def token_log_probs(
    logits: Tensor, ids: Tensor, temperature: float = 1.0, banned: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The log-prob of each sampled token and the entropy of the distribution it was sampled from.

    Args:
        logits: Next-token logits at the completion positions, ``[n, L, V]`` (any float dtype;
            computed in float32).
        ids: The sampled tokens, ``[n, L]``.
        temperature: The sampling temperature: logits are divided by it, so the distribution scored
            is the one that was sampled.
        banned: Tokens sampling suppressed, ``[V]`` bool; they get probability 0 here too. None bans
            nothing.

    Returns:
        ``(logps, entropy)``, both ``[n, L]``.
    """
    logits = logits.float() / temperature  # [n, L, V]
    if banned is not None:
        logits = logits.masked_fill(banned, torch.finfo(logits.dtype).min)
    log_z = logits.logsumexp(dim=-1)  # [n, L]
    logps = logits.gather(-1, ids[..., None]).squeeze(-1) - log_z  # [n, L]
    entropy = log_z - (logits.softmax(dim=-1) * logits).sum(dim=-1)  # [n, L]
    return logps, entropy


def chunked_token_scores(
    hidden: Tensor,
    weight: Tensor,
    ids: Tensor,
    bias: Tensor | None = None,
    temperature: float = 1.0,
    banned: Tensor | None = None,
    chunk: int = 256,
    mask: Tensor | None = None,
    entropy: bool = True,
    greedy: bool = True,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """`token_log_probs` of the logits ``hidden @ weight.T + bias``, computed ``chunk`` tokens at a
    time.

    Values and gradients are those of the full-logits path, but the ``[*, V]`` logits only ever
    exist for ``chunk`` tokens: the backward recomputes each chunk's (`ChunkedScores`), so memory
    grows with the chunk, not with ``n x L x V``.

    Args:
        hidden: Final hidden states at the completion positions, ``[n, L, D]``.
        weight: The output head's weight, ``[V, D]`` (tied to the input embeddings or not).
        ids: The sampled tokens, ``[n, L]``.
        bias: The output head's bias, ``[V]``, or None.
        temperature: The sampling temperature (see `token_log_probs`).
        banned: Tokens sampling suppressed, ``[V]`` bool, or None.
        chunk: Tokens whose logits are held at once.
        mask: ``[n, L]`` bool, the positions to score; the others get 0 and cost nothing. None
            scores every position.
        entropy: Also compute the entropy; False skips its work and returns None in its place.
        greedy: Also flag the tokens that are the most likely unbanned one; False skips the argmax
            (and a masking pass) of every chunk and returns None in its place.

    Returns:
        ``(logps, entropy, greedy)``, ``[n, L]`` each; ``greedy`` (bool): the sampled token is the
        most likely unbanned one.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1 token, got {chunk}")
    flat, picked = hidden.reshape(-1, hidden.shape[-1]), ids.reshape(-1)  # [n*L, D], [n*L]
    keep = None if mask is None else mask.reshape(-1).nonzero().squeeze(1)  # [M] positions scored
    if keep is not None:
        flat, picked = flat[keep], picked[keep]  # [M, D], [M]
    logps, ent, flags = ChunkedScores.apply(flat, weight, bias, picked, banned, temperature, chunk, entropy, greedy)
    return (
        _spread(logps, keep, ids.shape),
        _spread(ent, keep, ids.shape) if entropy else None,
        _spread(flags, keep, ids.shape) if greedy else None,
    )


def _spread(values: Tensor, keep: Tensor | None, shape: torch.Size) -> Tensor:
    """``[M]`` values put back at their positions ``keep`` of an ``[n, L]`` tensor of zeros."""
    if keep is None:
        return values.reshape(shape)
    return values.new_zeros(shape.numel()).index_copy(0, keep, values).reshape(shape)


def _tempered(raw: Tensor, temperature: float, banned: Tensor | None, ids: Tensor | None = None):
    """The float32 logits `token_log_probs` scores, ``[c, V]``, from the head's output ``raw``
    (overwritten when it is float32 already); with ``ids`` ``[c]`` also whether each is the argmax
    of the unbanned raw logits (as `zoo.PolicyModule` defines greedy), else None."""
    logits = raw.float()  # [c, V]
    greedy = None
    if ids is not None:
        if banned is not None:
            logits.masked_fill_(banned, float("-inf"))
        greedy = logits.argmax(dim=-1) == ids  # [c]; before the division, which could make ties
    if temperature != 1.0:
        logits.div_(temperature)
    if banned is not None:  # after the division: the smallest float over a temperature < 1 is -inf
        logits.masked_fill_(banned, torch.finfo(logits.dtype).min)
    return logits, greedy


class ChunkedScores(torch.autograd.Function):
    """Log-probs, entropy and greedy flags of ``M`` tokens from their hidden states ``[M, D]`` and
    the output head, a chunk of tokens at a time, with the logits of each chunk recomputed in the
    backward (see `chunked_token_scores`). Gradients reach the hidden states and the head's weight
    and bias; the entropy's only when it is used."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, ids, banned, temperature, chunk, entropy, flag_greedy):
        m = len(ids)
        logps, log_z = (hidden.new_empty(m, dtype=torch.float32) for _ in range(2))  # [M]
        ent = torch.empty_like(logps) if entropy else logps.new_empty(0)  # [M] or [0]
        greedy = torch.empty_like(ids, dtype=torch.bool) if flag_greedy else ids.new_empty(0, dtype=torch.bool)
        ctx.dtype = None
        for s in range(0, m, chunk):
            part = slice(s, s + chunk)
            raw = nn.functional.linear(hidden[part], weight, bias)  # [c, V], autocast applies
            ctx.dtype = raw.dtype
            logits, flags = _tempered(raw, temperature, banned, ids[part] if flag_greedy else None)
            if flag_greedy:
                greedy[part] = flags
            log_z[part] = logits.logsumexp(dim=-1)
            logps[part] = logits.gather(-1, ids[part, None]).squeeze(-1) - log_z[part]
            if entropy:
                ent[part] = log_z[part] - logits.softmax(dim=-1).mul_(logits).sum(dim=-1)
        ctx.save_for_backward(hidden, weight, bias, ids, banned, log_z, ent)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(greedy)
        return logps, ent, greedy

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_logps, grad_entropy, _):
        hidden, weight, bias, ids, banned, log_z, ent = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        if (grad_logps is None and grad_entropy is None) or ctx.dtype is None:
            return (None,) * 9
        dtype = ctx.dtype  # of the forward's logits: the head's, or autocast's
        w, b = weight.to(dtype), None if bias is None else bias.to(dtype)
        grad_hidden = torch.zeros_like(hidden) if need_hidden else None  # [M, D]
        grad_weight = torch.zeros_like(weight) if need_weight else None  # [V, D]
        grad_bias = torch.zeros_like(bias) if need_bias else None  # [V]
        for s in range(0, len(ids), ctx.chunk):
            part = slice(s, s + ctx.chunk)
            h = hidden[part].to(dtype)  # [c, D]
            logits, _ = _tempered(nn.functional.linear(h, w, b), ctx.temperature, banned)  # [c, V]
            grad = _logits_grad(
                logits,
                log_z[part],
                ent[part] if grad_entropy is not None else None,
                ids[part],
                _part(grad_logps, part),
                _part(grad_entropy, part),
                banned,
                ctx.temperature,
            ).to(dtype)  # [c, V]
            if need_hidden:
                grad_hidden[part] = grad @ w
            if need_weight:
                _add_product(grad_weight, grad.T, h)
            if need_bias:
                grad_bias += grad.sum(dim=0)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None, None, None


def _part(grad: Tensor | None, part: slice) -> Tensor | None:
    return None if grad is None else grad[part]


def _logits_grad(logits, log_z, ent, ids, grad_logps, grad_entropy, banned, temperature) -> Tensor:
    """Gradient ``[c, V]`` of the loss on the head's output, given those on the chunk's log-probs
    and entropy ``[c]`` (either may be None): ``d logp_i / dz = onehot(i) - p`` and ``dH / dz =
    -p (log p + H)`` in the tempered logits ``z`` (``logits``, overwritten), over the temperature;
    zero at banned tokens."""
    log_p = logits.sub_(log_z[:, None])  # [c, V]
    probs = log_p.exp()  # [c, V]
    if grad_logps is None:
        grad = torch.zeros_like(probs)
    else:
        grad = probs.mul(-grad_logps[:, None]).scatter_add_(1, ids[:, None], grad_logps[:, None])
    if grad_entropy is not None:
        grad -= log_p.add_(ent[:, None]).mul_(probs).mul_(grad_entropy[:, None])
    if banned is not None:
        grad.masked_fill_(banned, 0.0)
    return grad.div_(temperature) if temperature != 1.0 else grad


def _add_product(out: Tensor, a: Tensor, b: Tensor) -> None:
    """``out += a @ b`` without a temporary where the dtypes allow."""
    if a.dtype == out.dtype:
        out.addmm_(a, b)
    else:
        out += (a @ b).to(out.dtype)
