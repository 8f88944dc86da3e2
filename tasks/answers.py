"""Answer formats, strict extraction and the one permutation convention shared by every task.

Formats: ``tags`` (``<think>...</think><answer>...</answer>``), ``boxed`` (``\\boxed{...}``),
    ``bare``.
Extraction is strict: a completion that does not match its format, or whose answer is empty, yields
no answer (so ``<answer></answer>`` can never be rewarded the way a substring check would reward
it).

Permutation convention (Visual Jigsaw, VideoSSR, SSL4RL): pieces are shown in a shuffled order and
labelled 1..K in the order shown. The answer lists, for each original slot in raster (or
chronological) order, the label of the shown piece that belongs there. `restore` inverts it.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from typing import TypeVar

FORMATS = ("tags", "boxed", "bare")
PERMUTATION_SCORES = ("exact", "fraction", "footrule")
T = TypeVar("T")

_TAG = re.compile(r"</?(?:think|answer)>")
THINK_THEN_ANSWER = re.compile(r"</think>\s*<answer>")  # no two quantifiers compete: linear
_OPEN = "<answer>"
_CLOSE = "</answer>"
_BOXED = r"\\boxed\{"
_INTERVAL = re.compile(r"\s*(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)\s*")


def instruction(answer_format: str, think: bool) -> str:
    """The sentence that tells the policy how to lay out its completion."""
    reason = "First reason step by step inside <think> </think>. " if think else ""
    if answer_format == "tags":
        return reason + "Put only the final answer inside <answer> </answer>."
    if answer_format == "boxed":
        return reason + "Put only the final answer inside \\boxed{}."
    if think:
        raise ValueError("think=True needs answer_format 'tags' or 'boxed': a bare answer has no delimiter")
    return "Reply with the answer only."


def wrap(answer: str, answer_format: str, think: bool) -> str:
    """The completion that states ``answer`` in ``answer_format`` (what a perfect policy writes)."""
    prefix = "<think>\n</think>\n" if think else ""
    if answer_format == "tags":
        return f"{prefix}<answer>{answer}</answer>"
    if answer_format == "boxed":
        return f"{prefix}\\boxed{{{answer}}}"
    return answer


def extract(completion: str, answer_format: str, think: bool) -> tuple[str | None, bool]:
    """Return ``(answer, well_formed)``; ``answer`` is None unless the whole completion is well
    formed.

    Linear in the length of the completion whatever it holds: no pattern here can backtrack.
    """
    if answer_format == "tags":
        answer = _extract_tags(completion, think)
    elif answer_format == "boxed":
        answer = _extract_boxed(completion, think)
    else:
        answer = completion.strip()
    if not answer or _TAG.search(answer):
        return None, False
    return answer, True


def format_tag(text: str) -> str | None:
    """The first answer-format tag (``<answer>``, ``</think>``, ...) in ``text``, or None. An answer
    holding one is never extracted, in any format: an option that holds one can never be chosen by
    its text, so readers refuse such options."""
    found = _TAG.search(text)
    return found[0] if found else None


def _extract_tags(completion: str, think: bool) -> str | None:
    """The answer of a completion laid out ``<think>...</think><answer>...</answer>`` (the think
    block optional unless ``think``; whitespace around the blocks allowed): the text between the
    first ``<answer>`` after the first ``</think>`` that one follows, and the final ``</answer>``,
    stripped."""
    body = completion.strip()
    if not body.endswith(_CLOSE):
        return None
    start = None
    if body.startswith("<think>"):
        after = THINK_THEN_ANSWER.search(body, len("<think>"))
        start = after.end() if after else None
    if start is None and not think and body.startswith(_OPEN):
        start = len(_OPEN)
    end = len(body) - len(_CLOSE)
    return body[start:end].strip() if start is not None and start <= end else None


def after_think(text: str) -> int | None:
    """Where the text after a leading think block (``<think>...</think>``, whitespace before it)
    starts."""
    stripped = text.lstrip()
    close = stripped.find("</think>", len("<think>")) if stripped.startswith("<think>") else -1
    return None if close < 0 else len(text) - len(stripped) + close + len("</think>")


def _extract_boxed(completion: str, think: bool) -> str | None:
    """Content of the single ``\\boxed{...}`` (balanced braces) after an optional or required think
    block."""
    text = completion
    if think:
        start = after_think(completion)
        if start is None:
            return None
        text = completion[start:]
    starts = [m.end() for m in re.finditer(_BOXED, text)]
    return boxed_content(text, starts[0]) if len(starts) == 1 else None


def boxed_content(text: str, start: int) -> str | None:
    """The stripped text from ``start`` (just after a ``\\boxed{``) to the brace that closes it
    (braces balanced), or None when none does."""
    position = start
    depth = 1
    while (close := text.find("}", position)) >= 0:  # one step per closing brace, the opening ones counted
        depth += text.count("{", position, close) - 1
        if depth == 0:
            return text[start:close].strip()
        position = close + 1
    return None


def canonical_text(answer: str) -> str:
    """An answer's text less what never tells two answers apart: case, spaces, brackets and a final
    full stop (``(B).`` is ``b``). The ballot of a task that parses its answers no further."""
    return re.sub(r"[\s()\[\]{}]", "", answer).rstrip(".").casefold()


def parse_int(answer: str) -> int | None:
    """A lone integer, optionally signed; anything else is None."""
    match = re.fullmatch(r"\s*([+-]?\d{1,9})\s*", answer)
    return int(match[1]) if match else None


def parse_choice(answer: str, choices: Sequence[str]) -> str | None:
    """One of ``choices`` (case-insensitive, optional surrounding brackets or a trailing period)."""
    text = _unwrap(answer)
    if text is None:
        return None
    by_key = {c.lower(): c for c in choices}
    return by_key.get(text.lower())


def _unwrap(answer: str) -> str | None:
    """``answer`` less surrounding whitespace, a trailing period and one pair of brackets (``()`` or
    ``[]``, either side optional); None when nothing is left or a bracket remains inside. String
    operations only: a pattern for the same thing backtracks for seconds on a few hundred spaces."""
    text = answer.strip()
    if len(text) > 1 and text.endswith("."):
        text = text[:-1].rstrip()
    if text[-1:] in (")", "]"):
        text = text[:-1].rstrip()
    if text[:1] in ("(", "["):
        text = text[1:].lstrip()
    if not text or any(bracket in text for bracket in "()[]"):
        return None
    return text


def letter(index: int) -> str:
    """The label of option ``index`` in a lettered multiple choice: A, B, ..."""
    return chr(65 + index)


def choice_prompt(options: Sequence[str]) -> str:
    """Options listed as ``A) ...`` lines, then the request to answer with a letter."""
    listed = "\n".join(f"{letter(i)}) {text}" for i, text in enumerate(options))
    return f"{listed}\nAnswer with the letter of the correct option."


def parse_letter(answer: str, options: Sequence[T], strict: bool = False) -> T | None:
    """The option a lettered answer picks, or None.

    Args:
        answer: The extracted answer.
        options: The options, lettered A, B, ... in order.
        strict: Only the option's uppercase letter, alone, counts (what strict exact-match harnesses
            and Jigsaw-R1's format check accept); False also takes what `parse_choice` takes (``b``,
            ``(B)``, ``B.``).
    """
    letters = [letter(i) for i in range(len(options))]
    chosen = (answer.strip() if answer.strip() in letters else None) if strict else parse_choice(answer, letters)
    return None if chosen is None else options[letters.index(chosen)]


def parse_permutation(answer: str, k: int) -> list[int] | None:
    """Labels 1..k each exactly once, separated by commas or spaces (a bare digit string if k <=
    9)."""
    text = answer.strip().strip("[]()").strip()
    if re.fullmatch(r"\d+", text) and k <= 9:
        tokens = list(text)
    else:
        tokens = [t for t in re.split(r"\s*,\s*|\s+", text) if t]
    if not all(t.isdecimal() for t in tokens):  # isdigit() admits "²", which int() rejects
        return None
    labels = [int(t) for t in tokens]
    return labels if sorted(labels) == list(range(1, k + 1)) else None


#: Most labels a ``choice``-style ordering question lists every order of: 4! = 24 lettered options,
#: while 5! = 120 would fit neither the alphabet nor a prompt.
MAX_CHOICE_ORDER = 4


def check_order_style(style: str, k: int | None = None, what: str = "labels") -> None:
    """ValueError unless ``style`` is ``order`` or ``choice`` and, given ``k``, a ``choice`` over
    ``k`` ``what`` (points, clips, ...) fits `MAX_CHOICE_ORDER`."""
    if style not in ("order", "choice"):
        raise ValueError(f"style must be 'order' or 'choice', got {style!r}")
    if style == "choice" and k is not None and k > MAX_CHOICE_ORDER:
        raise ValueError(f"style='choice' allows at most {MAX_CHOICE_ORDER} {what}, got {k}")


def orderings(k: int) -> list[list[int]]:
    """Every order of the labels ``1..k``, lexicographic: option A is ``1, 2, ..., k``."""
    return [list(order) for order in itertools.permutations(range(1, k + 1))]


def order_text(order: Sequence[int]) -> str:
    """An ordering as written in answers: ``2, 3, 1``."""
    return ", ".join(str(label) for label in order)


def order_options(k: int) -> str:
    """The lettered options of a ``choice``-style ordering question: every order of ``k`` labels."""
    return choice_prompt([order_text(order) for order in orderings(k)])


def order_answer(truth: Sequence[int], style: str) -> str:
    """The answer to an ordering question: the order itself (``order`` style) or its letter
    (``choice``)."""
    return letter(orderings(len(truth)).index(list(truth))) if style == "choice" else order_text(truth)


def parse_order(answer: str, k: int, style: str, strict: bool = False) -> list[int] | None:
    """The ordering an answer gives, in either style; None for anything but a valid order or option
    (``strict``: see `parse_letter`)."""
    return parse_letter(answer, orderings(k), strict) if style == "choice" else parse_permutation(answer, k)


def shuffle_answer(shown: Sequence[int]) -> list[int]:
    """The answer for a display order: ``shown[p]`` is the original slot of the piece shown at
    position p."""
    return [list(shown).index(slot) + 1 for slot in range(len(shown))]


def restore(shown_pieces: Sequence[T], answer: Sequence[int]) -> list[T]:
    """Put shown pieces back into original order using an answer in this module's convention."""
    return [shown_pieces[label - 1] for label in answer]


def permutation_scores(pred: Sequence[int], truth: Sequence[int]) -> dict[str, float]:
    """Graded agreement of two answers: ``exact``, ``fraction`` in place, and ``footrule``
    (1 - Spearman footrule distance / its maximum floor(k^2 / 2))."""
    k = len(truth)
    in_place = sum(p == t for p, t in zip(pred, truth, strict=True))
    where = {label: i for i, label in enumerate(pred)}
    distance = sum(abs(where[label] - i) for i, label in enumerate(truth))
    return {
        "exact": float(in_place == k),
        "fraction": in_place / k,
        "footrule": 1.0 - distance / (k * k // 2) if k > 1 else 1.0,
    }


def check_permutation_reward(reward: str, partial_credit: float) -> None:
    """Validate the reward options shared by the ordering tasks (image and video jigsaws)."""
    if reward not in PERMUTATION_SCORES:
        raise ValueError(f"reward must be one of {PERMUTATION_SCORES}, got {reward!r}")
    if not 0 <= partial_credit <= 1:
        raise ValueError(f"partial_credit must be in [0, 1], got {partial_credit}")


def graded_permutation(
    pred: Sequence[int],
    truth: Sequence[int],
    reward: str,
    partial_credit: float,
) -> dict[str, float]:
    """All `permutation_scores` plus ``accuracy``: the ``reward`` score, scaled by
    ``partial_credit`` unless the order is exact (Visual Jigsaw pays 0.2 x fraction for a valid but
    wrong order)."""
    scores = permutation_scores(pred, truth)
    accuracy = scores[reward] if scores["exact"] else partial_credit * scores[reward]
    return {"accuracy": accuracy, **scores}


def parse_interval(answer: str) -> tuple[float, float] | None:
    """A time interval written ``start-end`` in seconds (``3.5-6.0``); anything else is None."""
    match = _INTERVAL.fullmatch(answer)
    if not match:
        return None
    pred = float(match[1]), float(match[2])
    if not all(map(math.isfinite, pred)):  # hundreds of digits overflow to inf; inf - inf is NaN
        return None
    return pred


def temporal_iou(pred: tuple[float, float], truth: tuple[float, float]) -> float:
    """Intersection over union of two ``(start, end)`` intervals; 0 when ``pred`` ends before it
    starts."""
    (start, end), (true_start, true_end) = pred, truth
    if start > end:
        return 0.0
    inter = max(0.0, min(end, true_end) - max(start, true_start))
    union = (end - start) + (true_end - true_start) - inter
    if union <= 0:  # both intervals empty: right only at the same instant
        return float(start == true_start)
    return inter / union


def interval_text(interval: Sequence[float]) -> str:
    """A time interval as written in answers: ``1.5-2.3`` (seconds, one decimal)."""
    start, end = interval
    return f"{start:.1f}-{end:.1f}"


def interval_scores(answer: str, truth: Sequence[float]) -> dict[str, float] | None:
    """``{"accuracy": temporal IoU}`` of an interval answer; None when it is not a valid
    interval."""
    pred = parse_interval(answer)
    return None if pred is None else {"accuracy": temporal_iou(pred, tuple(truth))}
