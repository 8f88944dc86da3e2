"""Held-out downstream scores for the transfer claims: greedy one-letter answers of a policy to the
test split of `datamodules.SyntheticQuestions` (spatial relations, counting, relative depth,
temporal order), which no training stream draws from, per kind; and a callback that records them
during training (the curves)."""

from __future__ import annotations

import random
from functools import lru_cache

import torch
from lightning.pytorch import Callback

from datamodules.sources.synthetic_questions import QUESTION_KINDS

EVAL_BATCH = 16


def corpus(split: str = "train", size: int = 10**6, seed: int = 0):
    """The perception questions (`datamodules.SyntheticQuestions`) of ``split``, every kind in
    turn."""
    from datamodules import SyntheticQuestions

    return SyntheticQuestions(split=split, size=size, seed=seed)


def question_task():
    """How the corpus and the downstream benchmarks are asked: options in stored order, one bare
    letter."""
    from tasks import MultipleChoice

    return MultipleChoice(labels="letters", shuffle_choices=False, answer_format="bare")


@lru_cache(maxsize=4)
def benchmark(kind: str, size: int) -> tuple:
    """The first ``size`` held-out questions of ``kind`` as examples (seed 0 of the test split)."""
    from datamodules import SyntheticQuestions

    source = SyntheticQuestions(kinds=[kind], split="test", size=size)
    task = question_task()
    examples = [task.make_example(source[i], random.Random(i)) for i in range(size)]
    for i, example in enumerate(examples):
        example.uid = f"downstream:{kind}:{i}"
    return tuple(examples)


@torch.no_grad()
def downstream_scores(policy, size: int = 64, kinds: tuple[str, ...] = QUESTION_KINDS) -> dict[str, float]:
    """Greedy accuracy of ``policy`` on ``size`` held-out questions of each kind, and their
    ``mean``."""
    task = question_task()
    scores = {}
    for kind in kinds:
        examples = benchmark(kind, size)
        correct = 0.0
        for start in range(0, size, EVAL_BATCH):
            batch = list(examples[start : start + EVAL_BATCH])
            rollout = policy.sample(batch, 1, max_new_tokens=1, greedy=True)
            correct += sum(
                task.verify(ex, text).parts["accuracy"] for ex, text in zip(batch, rollout.completions, strict=True)
            )
        scores[kind] = correct / size
    scores["mean"] = sum(scores[k] for k in kinds) / len(kinds)
    return scores


class DownstreamProbe(Callback):
    """Records `downstream_scores` every ``every`` training steps (and at step 0): ``curve`` is a
    list of ``(step, scores)``. Evaluation only reads the policy; the training batches and the
    updates are unchanged."""

    def __init__(self, every: int, size: int = 64):
        self.every = every
        self.size = size
        self.batches = 0
        self.curve: list[tuple[int, dict[str, float]]] = []

    def on_train_start(self, trainer, module):
        if not self.curve:
            self.curve.append((0, downstream_scores(module, self.size)))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.batches += 1
        if self.every and self.batches % self.every == 0:
            self.curve.append((self.batches, downstream_scores(module, self.size)))
