"""Padding-free scoring (verl's ``use_remove_padding``, EasyR1's ``padding_free``): the rows of a
micro-batch as one sequence of batch 1, each row's real tokens (prompt without padding, completion
through its last counted token) one after the other, with position ids that restart at each row.

Hugging Face's mask code (transformers >= 5) reads such restarting position ids, when no attention
mask is given, as packed sequences: ``sdpa``, ``eager`` and ``flex_attention`` get a block-diagonal
causal mask (`masking_utils.find_packed_sequence_indices`), flash attention the rows' boundaries
(``cu_seqlens``). A family's own position logic (Qwen-VL's 3D rope ids) is computed per row by the
policy (`zoo.PolicyModule.packed_position_ids`) and handed in with the packed inputs.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: Attention implementations whose Hugging Face mask or kernel keeps packed rows apart.
PACKING_ATTENTION = ("sdpa", "eager", "flash_attention_2", "flash_attention_3")


def row_positions(attention_mask: Tensor) -> Tensor:
    """Position of each real token within its own row, the rows' real tokens one after the other,
    ``[1, total]``: 0, 1, ... restarting at each row (left padding left out)."""
    real = attention_mask.bool()  # [n, T]
    return (real.long().cumsum(1) - 1)[real][None]  # [1, total]


def pack_inputs(inputs: dict, media_keys: set[str], positions: Tensor) -> dict:
    """``inputs`` of ``n`` padded rows as one row: every per-token tensor (``[n, T]``: input ids,
    token types) keeps the real tokens of its rows in order, the media tensors stay as they are (the
    rows' media already come in row order, as their placeholders do), the attention mask goes (the
    ``positions`` mark where each row starts).

    Args:
        inputs: Model inputs of ``n`` rows, with their ``attention_mask`` ``[n, T]``.
        media_keys: Keys that hold media tensors, never packed.
        positions: The packed rows' position ids, ``[1, total]`` or ``[k, 1, total]``
            (`zoo.PolicyModule.packed_position_ids`).
    """
    real = inputs["attention_mask"].bool()  # [n, T]
    packed = {}
    for key, value in inputs.items():
        if key == "attention_mask":
            continue
        per_token = key not in media_keys and torch.is_tensor(value) and value.shape[:2] == real.shape
        packed[key] = value[real][None] if per_token else value  # [1, total, ...]
    return packed | {"attention_mask": None, "position_ids": positions}


def scored_positions(attention_mask: Tensor, mask: Tensor) -> Tensor:
    """Where, in the packed sequence, the model's output predicts each counted completion token:
    the position just before it, ``[K]`` for the ``K`` True entries of ``mask`` in row order.

    Args:
        attention_mask: ``[n, T]``, the last ``L`` columns the completion's.
        mask: ``[n, L]`` bool, the counted completion tokens (each row's a prefix of its columns).
    """
    n, length = mask.shape
    index = attention_mask.flatten().long().cumsum(0).view(n, -1) - 1  # [n, T], packed index of each real token
    before = index[:, -(length + 1) : -1]  # [n, L], the token before each completion column
    return before[mask]  # [K]


def unpack(values: Tensor, mask: Tensor) -> Tensor:
    """Scores of the counted tokens in row order ``[K]`` back to the padded layout ``[n, L]``, 0
    (False) elsewhere, as the padded path gives them."""
    out = values.new_zeros(mask.shape)
    return out.masked_scatter(mask, values)
