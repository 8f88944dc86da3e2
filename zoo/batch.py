"""Processor outputs that can be re-indexed by prompt row without mixing up media tensors.

Processors flatten the media of a batch (Qwen-VL: ``pixel_values`` holds the patches of every image,
one ``image_grid_thw`` row per image). Repeating prompts G times or cutting micro-batches must move
each prompt's own patches along with it; getting this wrong is the most common VLM-GRPO bug
(PEERS.md, section 0.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class MediaSpec:
    """How one media kind is laid out in a processor output.

    Args:
        per_item: Keys whose first dimension has one entry per media item (e.g. ``image_grid_thw``).
        flat: Key whose rows are the concatenated patches of all items, or None.
        grid: Key in ``per_item`` whose row product is the number of ``flat`` rows of each item.
        per_row: Keys with one entry per prompt, padded over that prompt's items (Idefics3's
            ``pixel_values`` ``[B, max crops, 3, H, W]``); left out when the selected prompts hold
            no item.
        counts: Key that gets the number of items of each selected prompt holding any
            (LLaVA-OneVision's ``batch_num_images``), or None.
    """

    per_item: tuple[str, ...] = ()
    flat: str | None = None
    grid: str | None = None
    per_row: tuple[str, ...] = ()
    counts: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        return (*self.per_item, *self.per_row, *(key for key in (self.flat, self.counts) if key))


@dataclass
class PromptBatch:
    """Encoded prompts (left padded) plus the bookkeeping to select any rows of it.

    Attributes:
        tensors: Processor output; per-prompt tensors have batch dim B, media tensors are flattened.
        items: Number of media items of each kind in each prompt, e.g. ``{"image": [1, 1, 2]}``.
        specs: Layout of each media kind present in ``tensors``.
    """

    tensors: dict[str, Tensor]
    items: dict[str, list[int]]
    specs: dict[str, MediaSpec]

    @property
    def size(self) -> int:
        return self.tensors["input_ids"].shape[0]

    @property
    def media_keys(self) -> set[str]:
        return {key for spec in self.specs.values() for key in spec.keys}

    def select(self, rows: list[int] | Tensor) -> dict[str, Tensor]:
        """Processor-style inputs for prompts ``rows`` (repeats allowed), in that order."""
        rows = [int(r) for r in rows]
        media_keys = self.media_keys
        out = {k: v[rows] for k, v in self.tensors.items() if k not in media_keys}
        for kind, spec in self.specs.items():
            if any(key in self.tensors for key in spec.keys):
                out.update(self._select_media(spec, self.items[kind], rows))
        return out

    def media(self, kind: str, rows: list[int]) -> dict[str, Tensor]:
        """Only the ``kind`` media tensors of prompts ``rows``; empty when those prompts hold no
        such item."""
        spec = self.specs.get(kind)
        if spec is None or not any(key in self.tensors for key in spec.keys):
            return {}
        return self._select_media(spec, self.items[kind], [int(r) for r in rows])

    def _select_media(self, spec: MediaSpec, counts: list[int], rows: list[int]) -> dict[str, Tensor]:
        first = [0, *torch.tensor(counts).cumsum(0).tolist()]  # item offsets per prompt
        item_ids = [i for r in rows for i in range(first[r], first[r + 1])]
        if not item_ids:  # e.g. a micro-batch of text-only prompts: empty media would crash the encoder
            return {}
        out = {key: self.tensors[key][item_ids] for key in spec.per_item if key in self.tensors}
        out |= {key: self.tensors[key][rows] for key in spec.per_row if key in self.tensors}
        if spec.counts is not None:
            out[spec.counts] = torch.tensor([counts[r] for r in rows if counts[r]])
        if spec.flat is not None:
            sizes = self.tensors[spec.grid].prod(-1).tolist()  # flat rows per item
            starts = [0, *torch.tensor(sizes).cumsum(0).tolist()]
            pieces = [self.tensors[spec.flat][starts[i] : starts[i + 1]] for i in item_ids]
            out[spec.flat] = torch.cat(pieces)
        return out

    def to(self, device: torch.device) -> PromptBatch:
        return PromptBatch({k: v.to(device) for k, v in self.tensors.items()}, self.items, self.specs)
