"""Rollouts: G sampled completions for each of B prompts, and the model inputs to score them again.

Row ``n`` of every ``[N, ...]`` tensor belongs to prompt ``n // G`` (groups are contiguous).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from zoo.batch import PromptBatch


def completion_mask(ids: Tensor, eos_ids: list[int]) -> tuple[Tensor, Tensor]:
    """Mask of the tokens up to and including the first EOS, and which rows never emitted one.

    Args:
        ids: Generated tokens, ``[N, L]``.
        eos_ids: Token ids that end a completion.

    Returns:
        ``mask`` ``[N, L]`` (bool) and ``truncated`` ``[N]`` (bool).
    """
    is_eos = torch.isin(ids, torch.tensor(eos_ids, device=ids.device))  # [N, L]
    truncated = ~is_eos.any(dim=1)  # [N]
    first = torch.where(truncated, ids.shape[1], is_eos.int().argmax(dim=1))  # [N]
    mask = torch.arange(ids.shape[1], device=ids.device)[None, :] <= first[:, None]  # [N, L]
    return mask, truncated


@dataclass
class Rollout:
    """Sampled completions of a batch of prompts.

    Attributes:
        examples: The B prompts' examples.
        prompts: Their encoding (B rows).
        num_generations: G, completions per prompt.
        completion_ids: ``[N, L]``; positions after the first EOS hold an EOS id, so they stay
            scorable.
        completion_mask: ``[N, L]`` bool, the tokens that count (through the first EOS).
        truncated: ``[N]`` bool, rows that hit ``max_new_tokens`` without an EOS.
        completions: N decoded texts, without the EOS.
        temperature: Sampling temperature; log-probs are taken at the same temperature.
    """

    examples: list
    prompts: PromptBatch
    num_generations: int
    completion_ids: Tensor
    completion_mask: Tensor
    truncated: Tensor
    completions: list[str]
    temperature: float = 1.0

    @property
    def size(self) -> int:
        """N = B * G."""
        return self.completion_ids.shape[0]

    def example(self, row: int):
        return self.examples[row // self.num_generations]

    def completion_columns(self, rows: Tensor) -> int:
        """Completion columns ``rows`` need: through the last counted token of the longest of
        them."""
        used = torch.nonzero(self.completion_mask[rows].any(0))  # [columns used, 1]
        return int(used.max()) + 1 if len(used) else 1

    def model_inputs(self, rows: Tensor, trim: bool = False) -> dict[str, Tensor]:
        """Prompt + completion inputs for ``rows`` (``[n]`` row indices), ready for a forward pass.

        ``trim`` leaves out the prompt columns that are padding in every one of the rows and the
        completion columns after `completion_columns`: a shorter forward pass whose kept positions
        see the same tokens (left padding is masked out, and the cut tail comes after every scored
        token).
        """
        prompt = self.prompts.select((rows // self.num_generations).tolist())
        n, p = prompt["input_ids"].shape
        length = self.completion_columns(rows) if trim else self.completion_ids.shape[1]
        start = int(prompt["attention_mask"].any(0).int().argmax()) if trim else 0  # first column in use
        ids, mask = self.completion_ids[rows, :length], self.completion_mask[rows, :length]  # [n, length]
        for key, value in prompt.items():
            if key not in self.prompts.media_keys and value.dim() == 2 and value.shape == (n, p):
                tail = {"input_ids": ids, "attention_mask": mask.to(value.dtype)}.get(key)
                if tail is None:  # e.g. mm_token_type_ids: completion tokens are text
                    tail = torch.zeros_like(ids, dtype=value.dtype)
                prompt[key] = torch.cat([value[:, start:], tail], dim=1)
        return prompt
