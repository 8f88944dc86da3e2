"""Labelled conversations as a data module: each assistant turn of a chat file is a prompt (the
history before it) whose demonstration is the recorded reply, for supervised fine-tuning (`zoo.sft`)
and its held-out check."""

from __future__ import annotations

import random
import re
from typing import Literal

from datamodules.base import PretextDataModule
from datamodules.sources.conversations import Conversations, Dialogue
from tasks import Example, Task


class Replies(Task):
    """The recorded assistant turn of a `datamodules.Conversations` item as the answer: the
    demonstration is the reply itself, and a completion is correct when it matches it (exactly, or
    after ``normalised`` folding of case, spaces and a final period), a strict check that suits
    short answers (VQA, captions of a word or two) and reads as a lower bound on free-form ones.

    Args:
        match: ``normalised`` (case, runs of white space and a trailing period ignored) or
            ``exact``.
        format_weight: Reward added for any non-empty completion, on top of the accuracy in [0, 1].
    """

    name = "conversation"
    modality = "conversation"

    def __init__(self, match: Literal["normalised", "exact"] = "normalised", format_weight: float = 0.0):
        if match not in ("normalised", "exact"):
            raise ValueError(f"match must be 'normalised' or 'exact', got {match!r}")
        super().__init__(answer_format="bare", format_weight=format_weight)
        self.match = match

    def make_example(self, item: Dialogue, rng: random.Random) -> Example:
        return Example(item.messages, item.reply, self.name, {"source": item.name})

    def answer_text(self, example: Example) -> str:
        return example.answer

    def score(self, example: Example, answer: str) -> dict[str, float]:
        return {"accuracy": float(self._key(answer) == self._key(example.answer))}

    def _key(self, text: str) -> str:
        if self.match == "exact":
            return text.strip()
        return re.sub(r"\s+", " ", text).strip().rstrip(".").strip().casefold()


class ConversationDataModule(PretextDataModule):
    """Batches of conversation turns for SFT: every assistant turn of ``source`` is one example (its
    history as the prompt, the recorded reply as the demonstration and answer), shuffled, sharded
    across ranks, resumable and held out exactly as `PretextDataModule` does. Held-out accuracy is
    `Replies`' match of the greedy completion with the recorded reply.

    Without ``val_source`` the last ``val_size`` turns of ``source`` are held out (turns of one
    conversation are consecutive, so at most one conversation is split); a separate file gives a
    clean split.

    Args:
        source: The training conversations (`datamodules.Conversations`).
        val_source: Held-out conversations; None holds out the last ``val_size`` turns of
            ``source``.
        val_size: Held-out turns (0 disables validation).
        batch_size: Turns per batch on each rank.
        match: How a held-out completion must match the reply (see `Replies`).
        num_workers: DataLoader worker processes (media decode in them).
        seed: Selects the per-epoch order.
        epoch_size: Training turns per epoch; None means one pass over ``source``.
    """

    def __init__(
        self,
        source: Conversations,
        val_source: Conversations | None = None,
        val_size: int = 64,
        batch_size: int = 8,
        match: Literal["normalised", "exact"] = "normalised",
        num_workers: int = 0,
        seed: int = 0,
        epoch_size: int | None = None,
    ):
        super().__init__(
            source,
            Replies(match=match),
            batch_size=batch_size,
            val_source=val_source,
            val_size=val_size,
            num_workers=num_workers,
            seed=seed,
            epoch_size=epoch_size,
        )
