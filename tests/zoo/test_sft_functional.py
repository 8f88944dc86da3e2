"""SFT math against hand-computed numbers."""

import math

import pytest
import torch
from torch.testing import assert_close

from zoo.sft import functional as F

HALF, QUARTER = math.log(0.5), math.log(0.25)


def batch():
    """Two rows: tokens with p = 1/2 and 1/4 then padding (-inf, as a masked-out pad id scores), and
    one token with p = 1/2 then padding."""
    logps = torch.tensor([[HALF, QUARTER, float("-inf")], [HALF, 0.0, float("-inf")]], requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    return logps, mask


def test_token_mean_by_hand():
    logps, mask = batch()
    loss = F.sft_loss(logps, mask, "token")
    # (log 2 + log 4 + log 2) / 3 tokens = 4 log 2 / 3
    assert_close(loss, torch.tensor(4 * math.log(2) / 3))
    loss.backward()
    # d/d logp = -1/3 on each counted token, 0 elsewhere (no NaN from the -inf padding)
    expected = torch.tensor([[-1 / 3, -1 / 3, 0.0], [-1 / 3, 0.0, 0.0]])
    assert_close(logps.grad, expected)


def test_sequence_mean_by_hand():
    logps, mask = batch()
    loss = F.sft_loss(logps, mask, "sequence")
    # row means (log 2 + log 4) / 2 = 1.5 log 2 and log 2, averaged over 2 rows: 1.25 log 2
    assert_close(loss, torch.tensor(1.25 * math.log(2)))
    loss.backward()
    # row 0: -1/2 per token / 2 rows; row 1: -1 / 2 rows
    assert_close(logps.grad, torch.tensor([[-0.25, -0.25, 0.0], [-0.5, 0.0, 0.0]]))


def test_divisor_makes_micro_batches_add_up():
    logps, mask = batch()
    whole = F.sft_loss(logps, mask, "token")
    parts = sum(F.sft_loss(logps[i : i + 1], mask[i : i + 1], "token", divisor=3.0) for i in range(2))
    assert_close(parts, whole)
    # a divisor of 1 is the plain sum: 4 log 2
    assert_close(F.sft_loss(logps, mask, "token", divisor=1.0), torch.tensor(4 * math.log(2)))


def test_token_weights_scale_each_token():
    logps, mask = batch()
    weights = torch.tensor([[2.0, 0.0, 5.0], [1.0, 9.0, 9.0]])
    # 2 log 2 + 0 + log 2 over 3 tokens; weights outside the mask change nothing
    assert_close(F.sft_loss(logps, mask, "token", weights=weights), torch.tensor(math.log(2)))


def test_no_counted_token_gives_zero_not_nan():
    logps = torch.full((2, 3), float("-inf"))
    mask = torch.zeros(2, 3, dtype=torch.bool)
    for normaliser in F.NORMALISERS:
        assert F.sft_loss(logps, mask, normaliser).item() == 0.0


def test_token_accuracy_counts_only_masked_tokens():
    greedy = torch.tensor([[True, False, True], [True, True, True]])
    _, mask = batch()
    assert F.token_accuracy(greedy, mask) == (2.0, 3.0)


def test_unknown_normaliser_is_a_clear_error():
    logps, mask = batch()
    with pytest.raises(ValueError, match="normaliser"):
        F.sft_loss(logps, mask, "batch")
