"""Padding-free scoring (`zoo.PolicyModule.pack_sequences`, `zoo.rollout.packing`): the rows of a
micro-batch packed into one sequence score and train as the padded batch does, through every policy
family's tiny checkpoint that supports it; the others refuse in one line."""

import pytest
import torch

from tests.zoo.test_logprobs_policies import assert_same_gradients, load, train_pass
from tests.zoo.test_policy_contract import CASES, examples_for
from zoo import HFVLMPolicy, QwenVLPolicy
from zoo.rollout.packing import pack_inputs, row_positions, scored_positions, unpack
from zoo.training import pack_rows

REFUSED = {"tiny:gemma3": "Gemma 3's bidirectional image-token mask"}
PACKING = [(cls, ckpt) for cls, ckpt in CASES if ckpt not in REFUSED]


def test_rows_pack_in_order_with_positions_restarting_per_row():
    # two left-padded rows: 2 prompt tokens + 2 completion columns (1 counted), 3 + 2 (2 counted)
    attention = torch.tensor([[0, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    ids = torch.tensor([[0, 5, 6, 7, 9], [1, 2, 3, 4, 8]])
    types = torch.tensor([[0, 0, 1, 0, 0], [0, 1, 1, 0, 0]])
    pixels = torch.randn(3, 4)
    positions = row_positions(attention)
    assert positions.tolist() == [[0, 1, 2, 0, 1, 2, 3, 4]]
    packed = pack_inputs(
        {"input_ids": ids, "attention_mask": attention, "mm_token_type_ids": types, "pixel_values": pixels},
        {"pixel_values"},
        positions,
    )
    assert packed["input_ids"].tolist() == [[5, 6, 7, 1, 2, 3, 4, 8]]
    assert packed["mm_token_type_ids"].tolist() == [[0, 1, 0, 0, 1, 1, 0, 0]]
    assert packed["pixel_values"] is pixels and packed["attention_mask"] is None
    mask = torch.tensor([[True, False], [True, True]])  # completion columns 3, 4
    # row 0's token 7 is predicted at packed 1 (its last prompt token 6); row 1's 4, 8 at 5, 6
    keep = scored_positions(attention, mask)
    assert keep.tolist() == [1, 5, 6]
    assert unpack(torch.tensor([-1.0, -2.0, -3.0]), mask).tolist() == [[-1.0, 0.0], [-2.0, -3.0]]


def test_a_packed_token_budget_counts_the_sum_of_the_rows_lengths():
    rows = torch.arange(3)
    lengths = torch.tensor([[6, 4], [9, 1], [1, 1]])  # 10, 10 and 2 tokens
    # padded, a pass costs rows x (longest prompt + longest completion): rows 0 and 1 would be
    # 2 x (9 + 4) = 26, rows 0 and 2 are 2 x 10; packed, all three are 22
    assert [b.tolist() for b in pack_rows(rows, lengths, 22)] == [[0, 2], [1]]
    assert [b.tolist() for b in pack_rows(rows, lengths, 22, packed=True)] == [[0, 1, 2]]
    assert [b.tolist() for b in pack_rows(rows, lengths, 21, packed=True)] == [[0, 1], [2]]
    assert [b.tolist() for b in pack_rows(rows, lengths, 22, size=2, packed=True)] == [[0, 1], [2]]


def cross_row_positions(policy):
    """The family's packed positions with the text positions counting on across rows: what the mask
    code would see if it missed the rows' boundaries (one causal sequence)."""
    own = policy.packed_position_ids

    def positions(model, inputs):
        out = own(model, inputs).clone()
        text = out if out.dim() == 2 else out[0]  # Qwen's [4, 1, total]: row 0 holds the text positions
        text.copy_(torch.arange(text.shape[-1]).expand_as(text))
        return out

    return positions


@pytest.mark.parametrize("cls,ckpt", PACKING, ids=[f"{cls.__name__}-{c}" for cls, c in PACKING])
def test_packed_scores_and_gradients_equal_the_padded_path(cls, ckpt):
    """Prompts of different lengths (left padded) and media, completions of different lengths,
    temperature 0.8, the chunked and the full-logits heads."""
    policy = load(cls, ckpt)
    rollout = policy.sample(examples_for(policy), 2, max_new_tokens=6, seed=1, temperature=0.8)
    assert len(set(rollout.prompts.tensors["attention_mask"].sum(1).tolist())) > 1  # left padding
    for chunk in (5, None):
        policy.pack_sequences = False
        expected, expected_grads = train_pass(policy, rollout, chunk)
        policy.pack_sequences = True
        got, grads = train_pass(policy, rollout, chunk)
        for key in ("logps", "entropy"):
            torch.testing.assert_close(got[key], expected[key], atol=2e-6, rtol=0, msg=f"{key}, chunk {chunk}")
        assert torch.equal(got["greedy"], expected["greedy"])
        assert_same_gradients(grads, expected_grads)
    # the case sees the packing: rows that attended to the rows before them would score otherwise
    policy.packed_position_ids = cross_row_positions(policy)
    crossed, _ = train_pass(policy, rollout, 5)
    assert (crossed["logps"] - expected["logps"]).abs().max() > 1e-3


def test_packed_old_and_reference_passes_and_eager_attention():
    """Qwen2.5-VL with eager attention: the no-grad old-policy pass and the reference model (a
    second copy) packed, any row subset and order, as padded."""
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl", attn_implementation="eager", pack_sequences=True)
    rollout = policy.sample(examples_for(policy), 3, max_new_tokens=5, seed=2, temperature=1.3)
    rows = torch.tensor([4, 0, 7, 8])
    passes = {}
    for packed in (False, True):
        policy.pack_sequences = packed
        with torch.no_grad():
            old, entropy = policy.token_log_probs(rollout, rows)
        passes[packed] = (old, entropy, policy.reference_log_probs(rollout, rows))
    for got, expected in zip(passes[True], passes[False], strict=True):
        torch.testing.assert_close(got, expected, atol=2e-6, rtol=0)


def test_families_and_attention_that_cannot_pack_refuse_in_one_line():
    with pytest.raises(ValueError, match=r"pack_sequences: HFVLMPolicy \(tiny:gemma3\).*Gemma 3") as err:
        load(HFVLMPolicy, "tiny:gemma3", pack_sequences=True)
    assert "\n" not in str(err.value)
    # the refusal is needed: forced to pack, Gemma 3's image prompts score otherwise
    gemma = load(HFVLMPolicy, "tiny:gemma3")
    rollout = gemma.sample(examples_for(gemma), 2, max_new_tokens=4, seed=1)
    rows = torch.arange(rollout.size)
    padded = gemma.token_log_probs(rollout, rows)[0]
    gemma.pack_sequences = True
    assert (gemma.token_log_probs(rollout, rows)[0] - padded).abs().max() > 1e-3
    policy = load(QwenVLPolicy, "tiny:qwen2_5_vl")
    policy.model.config.get_text_config()._attn_implementation = "flex_attention"
    assert "attention 'flex_attention'" in policy.packing_refused()
