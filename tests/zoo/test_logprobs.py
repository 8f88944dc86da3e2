"""Token log-probs and entropy (`zoo.rollout.logprobs`), against values worked out by hand."""

import math

import torch

from zoo.rollout.logprobs import token_log_probs

# one row, one position, three tokens with probabilities 1/4, 1/2, 1/4 at temperature 1
LOGITS = torch.log(torch.tensor([[[1.0, 2.0, 1.0]]]))  # [1, 1, 3]
SAMPLED = torch.tensor([[1]])  # [1, 1]


def test_log_prob_and_entropy_of_a_known_distribution():
    logps, entropy = token_log_probs(LOGITS, SAMPLED)
    torch.testing.assert_close(logps, torch.tensor([[math.log(0.5)]]))
    # -(1/4 ln 1/4 + 1/2 ln 1/2 + 1/4 ln 1/4) = 1.5 ln 2
    torch.testing.assert_close(entropy, torch.tensor([[1.5 * math.log(2)]]))


def test_temperature_scores_the_distribution_that_was_sampled():
    # logits / 2: probabilities proportional to sqrt(1, 2, 1), i.e. 1 - sqrt(2)/2, sqrt(2) - 1, 1 -
    # sqrt(2)/2
    logps, entropy = token_log_probs(LOGITS, SAMPLED, temperature=2.0)
    edge, middle = 1 - math.sqrt(2) / 2, math.sqrt(2) - 1  # 0.2929, 0.4142
    torch.testing.assert_close(logps, torch.tensor([[math.log(middle)]]))  # -0.8814
    hand = -(2 * edge * math.log(edge) + middle * math.log(middle))  # 0.7193 + 0.3651 = 1.0844
    torch.testing.assert_close(entropy, torch.tensor([[hand]]))


def test_banned_tokens_get_no_probability():
    # token 2 banned: probabilities 1/3, 2/3, 0
    banned = torch.tensor([False, False, True])
    logps, entropy = token_log_probs(LOGITS, SAMPLED, banned=banned)
    torch.testing.assert_close(logps, torch.tensor([[math.log(2 / 3)]]))
    torch.testing.assert_close(entropy, torch.tensor([[-(math.log(1 / 3) / 3 + 2 * math.log(2 / 3) / 3)]]))
    assert torch.isfinite(entropy).all()


def test_rows_and_positions_are_scored_independently_in_float32():
    logits = torch.zeros(2, 3, 4, dtype=torch.bfloat16)  # uniform over 4 tokens everywhere
    logits[1, 2] = torch.tensor([0.0, 0.0, 0.0, 100.0])  # row 1, position 2: certain of token 3
    ids = torch.tensor([[0, 1, 2], [3, 3, 3]])
    logps, entropy = token_log_probs(logits, ids)
    assert logps.dtype == torch.float32 and logps.shape == (2, 3)
    expected = torch.full((2, 3), math.log(0.25))
    expected[1, 2] = 0.0
    torch.testing.assert_close(logps, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(entropy[0], torch.full((3,), math.log(4)))
    assert float(entropy[1, 2]) < 1e-6
