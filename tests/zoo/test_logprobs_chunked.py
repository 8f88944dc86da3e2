"""Chunked scoring (`zoo.rollout.logprobs.chunked_token_scores`) against the full-logits reference
(`token_log_probs`): values and gradients (hidden states, head weight and bias) in float32, and no
tensor the size of all tokens x vocabulary, forward or backward."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from zoo.rollout.logprobs import chunked_token_scores, token_log_probs

N, L, D, V = 3, 7, 6, 23  # n * L = 21 tokens
BANNED = torch.zeros(V, dtype=torch.bool)
BANNED[[0, 5, 22]] = True


def inputs(seed: int = 0, bias: bool = True) -> dict:
    """Hidden states, head and sampled tokens (never a banned one), logits of order 1-5."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 5, (N, L), generator=gen)  # tokens 1-4: unbanned
    return {
        "hidden": torch.randn(N, L, D, generator=gen).requires_grad_(),
        "weight": torch.randn(V, D, generator=gen).requires_grad_(),
        "bias": torch.randn(V, generator=gen).requires_grad_() if bias else None,
        "ids": ids,
        "mask": torch.rand(N, L, generator=gen) > 0.3,
        "w_logps": torch.randn(N, L, generator=gen),
        "w_entropy": torch.rand(N, L, generator=gen) * 0.9,
    }


def reference(x: dict, temperature: float, banned, mask: bool, entropy: bool = True) -> tuple:
    """Scores of the full-logits path, zero outside the mask (as the chunked path gives them)."""
    logits = torch.nn.functional.linear(x["hidden"], x["weight"], x["bias"])  # [n, L, V], as a head computes them
    logps, ent = token_log_probs(logits, x["ids"], temperature, banned)
    unbanned = logits if banned is None else logits.masked_fill(banned, float("-inf"))
    greedy = unbanned.argmax(-1) == x["ids"]
    if mask:
        logps, ent, greedy = logps * x["mask"], ent * x["mask"], greedy & x["mask"]
    return logps, ent if entropy else None, greedy


def chunked(x: dict, temperature: float, banned, mask: bool, chunk: int, entropy: bool = True) -> tuple:
    return chunked_token_scores(
        x["hidden"], x["weight"], x["ids"], x["bias"], temperature, banned, chunk, x["mask"] if mask else None, entropy
    )


def scores_and_grads(score, x: dict, use_logps: bool = True) -> tuple[list, list]:
    """The scores, and the gradients on hidden, weight and bias of a loss on log-probs and
    entropy."""
    for key in ("hidden", "weight", "bias"):
        if x[key] is not None:
            x[key].grad = None
    logps, ent, greedy = score()
    loss = (logps * x["w_logps"]).sum() if use_logps else 0.0
    if ent is not None:
        loss = loss + (ent * x["w_entropy"]).sum()
    loss.backward()
    grads = [x[key].grad for key in ("hidden", "weight", "bias") if x[key] is not None and x[key].requires_grad]
    return [t.detach() if t is not None else None for t in (logps, ent, greedy)], grads


def assert_close(got, expected, logits: float = 1.0):
    """Float32 agreement within 1e-6 of the larger of the tensor's scale and the largest tempered
    logit (whose rounding both paths inherit: chunks change the matmul's summation order)."""
    scale = float(expected.abs().max()) if expected.is_floating_point() else 0.0
    torch.testing.assert_close(got, expected, atol=1e-6 * max(scale, logits, 1.0), rtol=0)


def largest_logit(x: dict, temperature: float) -> float:
    with torch.no_grad():
        return float(torch.nn.functional.linear(x["hidden"], x["weight"], x["bias"]).abs().max()) / temperature


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.6])
@pytest.mark.parametrize("banned", [None, BANNED], ids=["nothing_banned", "banned"])
@pytest.mark.parametrize("chunk", [1, 4, 21, 100])  # 4 does not divide 21 tokens, nor the masked count
@pytest.mark.parametrize("mask", [False, True], ids=["every_position", "masked"])
def test_values_and_gradients_equal_the_full_logits_path(temperature, banned, chunk, mask):
    x = inputs(seed=chunk)
    expected, expected_grads = scores_and_grads(lambda: reference(x, temperature, banned, mask), x)
    got, grads = scores_and_grads(lambda: chunked(x, temperature, banned, mask, chunk), x)
    logits = largest_logit(x, temperature)
    for g, e in zip(got, expected, strict=True):
        assert_close(g, e, logits)
    assert len(grads) == 3 and all(float(e.abs().max()) > 0 for e in expected_grads)
    for g, e in zip(grads, expected_grads, strict=True):
        assert_close(g, e, logits)


def test_entropy_bonus_alone_gets_its_own_gradient():
    """Only the entropy enters the loss (the log-probs' gradient never arrives)."""
    x = inputs(seed=1)
    _, expected = scores_and_grads(lambda: reference(x, 0.8, BANNED, True), x, use_logps=False)
    _, grads = scores_and_grads(lambda: chunked(x, 0.8, BANNED, True, 5), x, use_logps=False)
    for g, e in zip(grads, expected, strict=True):
        assert_close(g, e, largest_logit(x, 0.8))


def test_without_entropy_it_is_none_and_log_prob_gradients_are_unchanged():
    x = inputs(seed=2, bias=False)
    expected, expected_grads = scores_and_grads(lambda: reference(x, 1.3, BANNED, True, entropy=False), x)
    got, grads = scores_and_grads(lambda: chunked(x, 1.3, BANNED, True, 4, entropy=False), x)
    assert got[1] is None
    logits = largest_logit(x, 1.3)
    assert_close(got[0], expected[0], logits)
    for g, e in zip(grads, expected_grads, strict=True):
        assert_close(g, e, logits)


def test_a_frozen_head_gets_no_gradient_and_the_hidden_states_theirs():
    """As under LoRA, where the output head is never adapted."""
    x = inputs(seed=3)
    x["weight"].requires_grad_(False)
    x["bias"].requires_grad_(False)
    _, (expected,) = scores_and_grads(lambda: reference(x, 0.9, BANNED, True), x)
    _, (grad,) = scores_and_grads(lambda: chunked(x, 0.9, BANNED, True, 4), x)
    assert_close(grad, expected, largest_logit(x, 0.9))
    assert x["weight"].grad is None and x["bias"].grad is None


def test_a_head_tied_to_the_input_embeddings_sums_both_gradients():
    gen = torch.Generator().manual_seed(4)
    embedding = torch.randn(V, D, generator=gen).requires_grad_()
    tokens, ids = torch.randint(1, V, (N, L), generator=gen), torch.randint(1, 5, (N, L), generator=gen)
    mix = torch.randn(D, D, generator=gen) / D**0.5

    def grad(score) -> torch.Tensor:
        embedding.grad = None
        hidden = torch.tanh(embedding[tokens] @ mix)  # [n, L, D]: the "model" reads the embeddings too
        logps, ent = score(hidden)
        (logps.sum() + 0.5 * ent.sum()).backward()
        return embedding.grad

    expected = grad(lambda h: token_log_probs(h @ embedding.T, ids, 0.7, BANNED))
    got = grad(lambda h: chunked_token_scores(h, embedding, ids, temperature=0.7, banned=BANNED, chunk=4)[:2])
    assert_close(got, expected)


def test_bfloat16_and_autocast_give_the_reference_values():
    """Logits in the head's dtype (or autocast's), then float32, as the full-logits path."""
    x = inputs(seed=5)
    half = {k: v.detach().bfloat16() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in x.items()}
    for data, context in ((half, torch.autocast("cpu", enabled=False)), (x, torch.autocast("cpu", torch.bfloat16))):
        with torch.no_grad(), context:
            expected = reference(data, 0.7, BANNED, True)
            got = chunked(data, 0.7, BANNED, True, 4)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e, atol=1e-5, rtol=0)


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an operation returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("chunk", [3, 8])
def test_no_tensor_grows_with_tokens_times_vocabulary(chunk):
    """Forward and backward hold logits of ``chunk`` tokens at most; the full-logits path holds all
    of them."""
    gen = torch.Generator().manual_seed(6)
    n, length, width, vocab = 8, 16, 4, 50  # 128 tokens x 50 = 6,400 logits
    hidden = torch.randn(n, length, width, generator=gen, requires_grad=True)
    weight = torch.randn(vocab, width, generator=gen, requires_grad=True)
    ids = torch.randint(0, vocab, (n, length), generator=gen)
    bound = max(chunk * vocab, n * length * width, vocab * width)
    for score, fits in (
        (lambda: chunked_token_scores(hidden, weight, ids, chunk=chunk)[:2], True),
        (lambda: token_log_probs(hidden @ weight.T, ids), False),
    ):
        with LargestTensor() as seen:
            logps, ent = score()
            (logps.sum() + ent.sum()).backward()
        assert (seen.largest <= bound) == fits, (seen.largest, bound)


def test_a_chunk_under_one_token_is_an_error():
    x = inputs()
    with pytest.raises(ValueError, match="chunk"):
        chunked(x, 1.0, None, False, 0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("banned", [None, BANNED], ids=["nothing_banned", "banned"])
def test_without_greedy_flags_the_scores_and_gradients_are_the_same_bit_for_bit(temperature, banned):
    """``greedy=False`` (what GRPO's training pass asks) drops the flags and their argmax, not a
    bit of the log-probs, entropy or gradients."""
    x = inputs(seed=3)

    def score(greedy: bool):
        return lambda: chunked_token_scores(
            x["hidden"], x["weight"], x["ids"], x["bias"], temperature, banned, 4, x["mask"], greedy=greedy
        )

    (logps, ent, greedy), grads = scores_and_grads(score(True), x)
    (logps_, ent_, none), grads_ = scores_and_grads(score(False), x)
    assert greedy.dtype == torch.bool and greedy.shape == x["ids"].shape and none is None
    assert torch.equal(logps, logps_) and torch.equal(ent, ent_)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads_, strict=True))
