"""Label-free self-rewards (`tasks.SelfReward`), set on any task as its ``self_reward`` option: the
G completions of an example are rewarded by agreeing with each other, never with the hidden answer.

- `MajorityVote`: the most common valid answer is the pseudo-label (TTRL, arXiv 2504.16084).
- `CoReward`: each question is trained beside an analogical rewrite with the same answer; each is
  rewarded by agreeing with the other's majority (Co-Reward, arXiv 2508.00410,
  tmlr-group/Co-Reward).
- `RegionConsistency`: grounding predictions vote on a pixel grid; each earns its region's mean vote
  over the peak (GUI-RCPO, ZJU-REAL/GUI-RCPO ``voting_reward``).

The task still parses every completion (an invalid one never votes and earns nothing) and scores it
against the answer for the log: ``accuracy`` (and ``iou``, ...) stay the true values, ``agreement``
is what is paid.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Hashable
from dataclasses import replace
from typing import Any, Literal

import numpy as np
from PIL import Image

from tasks.base import Example, Reward, SelfReward, SkipItem, Task
from tasks.regions import Region, cells, density, vote_grid

#: ``Example.meta`` key marking the two halves of a Co-Reward pair: ``"question"``, then its
#: ``"rewrite"``.
ROLE_KEY = "co_reward"


def ballots(
    task: Task,
    example: Example,
    group: list[str],
) -> tuple[list[Reward], list[Hashable | None]]:
    """The true reward of each completion (for the log) and its ballot, the answer the task parses
    from it (`Task.canonical_answer`: ``90`` and ``90 degrees`` are one ballot, ``3, 1, 2`` and
    ``312`` another): None unless the task finds a valid answer in it (the format requirement:
    malformed and invalid answers never vote)."""
    truths = [task.verify(example, text) for text in group]
    keys = [
        task.canonical_answer(example, text) if truth.parts["format"] else None
        for text, truth in zip(group, truths, strict=True)
    ]
    return truths, keys


def winner(keys: list[Hashable | None], min_ratio: float) -> tuple[Hashable | None, float]:
    """The majority ballot and its share of all completions (invalid ones count against it); None
    (abstain) when nothing valid was said, when two answers tie for the most votes, or when the
    share is below ``min_ratio``."""
    votes = Counter(k for k in keys if k is not None).most_common(2)
    if not votes:
        return None, 0.0
    share = votes[0][1] / len(keys)
    tied = len(votes) == 2 and votes[1][1] == votes[0][1]
    return (None if tied or share < min_ratio else votes[0][0]), share


def paid(task: Task, truth: Reward, agreement: float, **logged: float) -> Reward:
    """A completion's self-reward: ``agreement`` plus the task's format weight and repetition
    penalty, with the true parts kept for the log beside ``agreement`` and the ``logged`` extras."""
    total = agreement + task.format_weight * truth.parts["format"]
    total -= task.repetition_penalty * truth.parts.get("repetition", 0.0)
    return Reward(total=total, parts={**truth.parts, "agreement": agreement, **logged})


def check_pairs(who: str, task: Task, examples: list[Example], key: str, roles: tuple[str, str], second: str) -> None:
    """Raise ValueError unless ``examples`` come in pairs whose ``meta[key]`` are ``roles``, in
    order: what a paired self-reward's ``make_examples`` makes (``second`` names the pair's second
    example in the message)."""
    found = [example.meta.get(key) for example in examples]
    if len(examples) % 2 or found != list(roles) * (len(examples) // 2):
        raise ValueError(
            f"{who} on {task.name!r} needs each question followed by {second} (the examples the "
            f"task's make_examples makes); got roles {found[:6]}"
        )


def _check_ratios(min_ratio: float, max_label_share: float) -> None:
    if not 0 <= min_ratio <= 1 or not 0 < max_label_share <= 1:
        raise ValueError(f"need min_ratio in [0, 1] and max_label_share in (0, 1], got {min_ratio}, {max_label_share}")


def unshared(
    labels: list[tuple[Hashable | None, float]],
    max_label_share: float,
) -> list[tuple[Hashable | None, float]]:
    """``labels`` (pseudo-label, share) of a batch's groups, with None for every label that more
    than one group and more than ``max_label_share`` of them elected: one answer for most questions
    is the collapse, not a consensus."""
    common = Counter(label for label, _ in labels if label is not None)
    limit = max_label_share * len(labels)
    return [
        (None if label is not None and common[label] > 1 and common[label] > limit else label, share)
        for label, share in labels
    ]


class MajorityVote(SelfReward):
    """TTRL's majority-vote pseudo-label: the most common valid answer among an example's G
    completions is taken as right; a completion earns 1 when its answer is it, 0 otherwise.

    Collapse guards (a self-reward is maximised by agreeing on anything): only valid answers vote
    (the format requirement), a tie abstains, ``min_ratio`` abstains on weak majorities, and
    ``max_label_share`` abstains when one answer wins most questions of a batch (the trivial-answer
    collapse Co-Reward reports for majority voting). An abstaining group earns only its format
    reward. Logged beside the true parts: ``majority`` (the winning share), ``abstained`` and
    ``label_accuracy`` (the true accuracy of the pseudo-label, for groups that did not abstain).

    Args:
        min_ratio: Least share of the G completions the majority answer must hold (TTRL: 0, any
            plurality).
        max_label_share: Most share of a batch's questions (of one task) one answer may win; above
            it those groups abstain. 1 disables the guard; it needs answers that mean the same
            across questions (letters, yes/no, counts).
    """

    def __init__(self, min_ratio: float = 0.0, max_label_share: float = 1.0):
        _check_ratios(min_ratio, max_label_share)
        self.min_ratio = min_ratio
        self.max_label_share = max_label_share

    def rewards(self, task: Task, examples: list[Example], completions: list[list[str]]) -> list[list[Reward]]:
        cast = [ballots(task, example, group) for example, group in zip(examples, completions, strict=True)]
        labels = unshared([winner(keys, self.min_ratio) for _, keys in cast], self.max_label_share)
        return [_agreements(task, group, group, *label) for group, label in zip(cast, labels, strict=True)]


def _agreements(
    task: Task,
    cast: tuple[list[Reward], list[Hashable | None]],
    voters: tuple[list[Reward], list],
    label: Hashable | None,
    share: float,
) -> list[Reward]:
    """Rewards of one group (its true rewards and ballots, ``cast``) against the pseudo-``label``
    that the ``voters`` group elected (None: abstain); ``label_accuracy`` is the truth of that
    label."""
    logged = {"majority": share, "abstained": float(label is None)}
    if label is not None:
        logged["label_accuracy"] = next(t.parts["accuracy"] for t, k in zip(*voters, strict=True) if k == label)
    truths, keys = cast
    return [
        paid(task, truth, float(label is not None and key == label), **logged)
        for truth, key in zip(truths, keys, strict=True)
    ]


class CoReward(SelfReward):
    """Co-Reward's cross-question agreement: each question is trained in the same batch as an
    analogical rewrite with the same answer, and the completions of each are rewarded by agreeing
    with the majority answer of the other's completions (the data module's batches then hold
    ``batch_size`` questions and their rewrites). Agreeing on a trivial answer no longer pays unless
    both phrasings reach it, which is how the paper resists the collapse of plain majority voting.

    Guards beyond the paper's (which takes any plurality, ties by first seen): only valid answers
    vote, a tie abstains, ``min_ratio`` abstains on weak majorities and ``max_label_share`` on an
    answer that wins most questions of the batch (a constant answer agrees across any rewrite).
    Logged as for `MajorityVote`, with ``majority`` and ``label_accuracy`` those of the other
    question's pseudo-label.

    Args:
        rewrite: Where the rewrite comes from. ``"photometric"`` (given by the task): the same
            example with its images, frames and sounds jittered in brightness, contrast and colour
            (or gain) by up to ``strength``; every pretext task whose answer is geometric or
            temporal keeps its answer. ``"item"`` (given by the source): the item's ``rewritten()``
            (a `tasks.Question` with a ``rewrite`` text), made into an example with the same random
            draws; items without one are skipped.
        strength: Largest relative change of a photometric rewrite.
        min_ratio: Least share of the other question's completions its majority must hold.
        max_label_share: Most share of a batch's questions and rewrites (of one task) one
            pseudo-label may be elected by; 1 disables the guard (as in the paper).
    """

    def __init__(
        self,
        rewrite: Literal["photometric", "item"] = "photometric",
        strength: float = 0.3,
        min_ratio: float = 0.0,
        max_label_share: float = 1.0,
    ):
        if rewrite not in ("photometric", "item"):
            raise ValueError(f"rewrite must be 'photometric' or 'item', got {rewrite!r}")
        if not 0 < strength < 1:
            raise ValueError(f"strength must be in (0, 1), got {strength}")
        _check_ratios(min_ratio, max_label_share)
        self.rewrite = rewrite
        self.strength = strength
        self.min_ratio = min_ratio
        self.max_label_share = max_label_share

    def examples(self, task: Task, item: Any, rng: random.Random) -> list[Example]:
        state = rng.getstate()
        question = task.make_example(item, rng)
        twin = random.Random()
        twin.setstate(state)  # the same draws: same permutation, angle or option order, so the same answer
        if self.rewrite == "photometric":
            rewrite = photometric(question, twin, self.strength)
        else:
            other = item.rewritten() if callable(getattr(item, "rewritten", None)) else None
            if other is None:
                raise SkipItem(f"{getattr(item, 'name', '') or type(item).__name__}: no rewrite for Co-Reward")
            rewrite = task.make_example(other, twin)
        question.meta[ROLE_KEY], rewrite.meta[ROLE_KEY] = "question", "rewrite"
        return [question, rewrite]

    def rewards(self, task: Task, examples: list[Example], completions: list[list[str]]) -> list[list[Reward]]:
        check_pairs("CoReward", task, examples, ROLE_KEY, ("question", "rewrite"), "its rewrite")
        cast = [ballots(task, example, group) for example, group in zip(examples, completions, strict=True)]
        voters = [cast[b ^ 1] for b in range(len(cast))]  # a question's voters are its rewrite's, and back
        labels = unshared([winner(keys, self.min_ratio) for _, keys in voters], self.max_label_share)
        pairs = zip(cast, voters, strict=True)
        return [_agreements(task, *pair, *label) for pair, label in zip(pairs, labels, strict=True)]


def photometric(example: Example, rng: random.Random, strength: float) -> Example:
    """A copy of ``example`` whose images and video frames are jittered in brightness, contrast and
    saturation and whose sounds in gain (each by a factor in ``[1 - strength, 1 + strength]`` from
    ``rng``, the same for every frame); SkipItem when it shows none of them."""
    factors = [rng.uniform(1 - strength, 1 + strength) for _ in range(3)]
    messages = []
    changed = 0
    for message in example.messages:
        content = message["content"]
        if isinstance(content, list):
            content = [_jittered(part, factors) for part in content]
            changed += sum(part["type"] in ("image", "video", "audio") for part in content)
        messages.append({**message, "content": content})
    if not changed:
        raise SkipItem(f"{example.task}: a photometric rewrite needs an image, video or audio part")
    return replace(example, messages=messages, meta=copy.deepcopy(example.meta))


def _jittered(part: dict, factors: list[float]) -> dict:
    kind = part["type"]
    if kind == "image":
        return {**part, "image": Image.fromarray(_jitter(np.asarray(part["image"].convert("RGB")), factors))}
    if kind == "video":
        frames = part["video"]
        if isinstance(frames, np.ndarray):
            return {**part, "video": _jitter(frames, factors)}
        return {**part, "video": [Image.fromarray(_jitter(np.asarray(f.convert("RGB")), factors)) for f in frames]}
    if kind == "audio":
        return {**part, "audio": np.clip(part["audio"] * factors[0], -1.0, 1.0).astype(np.float32)}
    return part


def _jitter(pixels: np.ndarray, factors: list[float]) -> np.ndarray:
    """``[..., 3]`` uint8 pixels with brightness, contrast and saturation scaled by ``factors``."""
    brightness, contrast, saturation = factors
    x = pixels.astype(np.float32) * brightness
    x = (x - x.mean()) * contrast + x.mean()
    gray = x @ np.array([0.299, 0.587, 0.114], np.float32)  # [..., ]
    x = gray[..., None] + (x - gray[..., None]) * saturation
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


class RegionConsistency(SelfReward):
    """GUI-RCPO's region-consistency reward for grounding (a task with a ``region`` method:
    `tasks.GUIGrounding`, `tasks.ReferringGrounding`): every valid prediction of an example adds one
    vote to each pixel of its region (a click point becomes a square of half side ``point_size``) on
    a grid the size of the answer space; a prediction earns the mean vote over its region divided by
    the highest vote of the grid, 1 when it lies wholly in the consensus region (GUI-RC's answer at
    test time).

    Guards: invalid predictions neither vote nor earn; a region larger than ``max_area`` of the grid
        earns 0
    and does not vote (covering the whole screen would otherwise agree with everything); and a group
    whose peak holds fewer than ``min_votes`` predictions abstains (nothing overlaps: no consensus
    to learn from). Logged beside the true parts: ``consensus`` (the peak's share of the G
    predictions) and ``abstained``.

    Args:
        point_size: Half side, in answer coordinates, of the square a predicted point votes for
            (GUI-RCPO's ``point_expand_size``: 10).
        max_area: Largest share of the grid one predicted region may cover and still vote.
        min_votes: Fewest predictions the peak must hold (1 never abstains, as in the paper).
    """

    def __init__(self, point_size: int = 10, max_area: float = 1.0, min_votes: int = 1):
        if point_size < 1 or min_votes < 1 or not 0 < max_area <= 1:
            raise ValueError(
                f"need point_size >= 1, min_votes >= 1 and max_area in (0, 1], got {point_size}, "
                f"{min_votes}, {max_area}"
            )
        self.point_size = point_size
        self.max_area = max_area
        self.min_votes = min_votes

    def check(self, task: Task) -> None:
        if not all(callable(getattr(task, name, None)) for name in ("region", "bounds")):
            raise ValueError(
                f"RegionConsistency needs a grounding task with region and bounds methods "
                f"(GUIGrounding, ReferringGrounding); {type(task).__name__} has none"
            )

    def rewards(self, task: Task, examples: list[Example], completions: list[list[str]]) -> list[list[Reward]]:
        return [self._group(task, example, group) for example, group in zip(examples, completions, strict=True)]

    def _group(self, task: Task, example: Example, group: list[str]) -> list[Reward]:
        truths = [task.verify(example, text) for text in group]
        width, height = task.bounds(example)
        boxes = [
            self._cells(task, example, text, width, height) if truth.parts["format"] else None
            for text, truth in zip(group, truths, strict=True)
        ]
        grid = vote_grid(boxes, width, height)  # [H, W] votes
        peak = int(grid.max())
        abstain = peak < self.min_votes
        logged = {"consensus": peak / len(group), "abstained": float(abstain)}
        return [
            paid(task, truth, 0.0 if abstain or box is None else density(grid, box, peak), **logged)
            for truth, box in zip(truths, boxes, strict=True)
        ]

    def _cells(self, task: Task, example: Example, text: str, width: int, height: int) -> tuple | None:
        """The grid cells ``(x1, y1, x2, y2)`` (end exclusive) a completion's region covers, or None
        when it covers none or more than ``max_area`` of the grid."""
        region = task.region(example, task.extract_answer(text))
        if region is None:
            return None
        return cells(Region(tuple(region), width, height), self.point_size, self.max_area)
