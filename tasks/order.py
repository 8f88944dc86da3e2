"""`OrderTask`: the base of the tasks whose answer puts shuffled pieces back in order."""

from __future__ import annotations

from typing import ClassVar, Literal

from tasks import answers
from tasks.base import Example, Task

#: The graded score an ordering task pays as its accuracy (one of `answers.PERMUTATION_SCORES`).
OrderReward = Literal["exact", "fraction", "footrule"]


class OrderTask(Task):
    """A task whose answer puts K shuffled pieces (tiles, clips, segments, slabs, marked points)
    back in order, in the permutation convention of `tasks.answers`, graded by its permutation
    scores.

    Subclasses implement `make_example` (``example.answer`` is the order, from
    `answers.shuffle_answer`); one that offers lettered options sets ``style`` to ``"choice"``.

    Args:
        reward: Which graded score is the accuracy: ``"exact"``, ``"fraction"`` (share of positions
            right) or ``"footrule"`` (1 - normalised Spearman footrule distance). All three are
            logged.
        partial_credit: Scale of the graded accuracy of a valid but wrong order; an exact order
            earns 1.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    parts = ("accuracy", *answers.PERMUTATION_SCORES)
    #: The graded scores `graded` computes, any of which ``reward`` may pay as the accuracy.
    rewards: ClassVar[tuple[str, ...]] = answers.PERMUTATION_SCORES
    #: ``"order"``: the answer lists the piece numbers; ``"choice"``: the letter of the listed
    #: order.
    style: str = "order"

    def __init__(self, reward: OrderReward = "fraction", partial_credit: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        if reward not in self.rewards:
            raise ValueError(f"reward must be one of {self.rewards}, got {reward!r}")
        if not 0 <= partial_credit <= 1:
            raise ValueError(f"partial_credit must be in [0, 1], got {partial_credit}")
        self.reward = reward
        self.partial_credit = partial_credit

    def answer_text(self, example: Example) -> str:
        return answers.order_answer(example.answer, self.style)

    def parse(self, answer: str, k: int) -> list[int] | None:
        """The order an answer gives (labels ``1..k`` in the `tasks.answers` convention), None for
        anything else."""
        return answers.parse_order(answer, k, self.style, self.strict_letters)

    def parse_answer(self, example: Example, answer: str) -> tuple[int, ...] | None:
        """The order as a tuple of labels (``3, 1, 2``, ``3 1 2`` and ``312`` are one order)."""
        order = self.parse(answer, len(example.answer))
        return None if order is None else tuple(order)

    def graded(self, pred: list[int], example: Example) -> dict[str, float]:
        """The `rewards` scores of a valid order: `answers.permutation_scores` (a task may add its
        own)."""
        return answers.permutation_scores(pred, example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        """The graded scores and, as ``accuracy``, the ``reward`` one, scaled by ``partial_credit``
        unless the order is exact (Visual Jigsaw pays 0.2 x fraction for a valid but wrong
        order)."""
        pred = self.parse(answer, len(example.answer))
        if pred is None:  # a non-permutation earns nothing, or repeating a label would collect partial credit
            return None
        scores = self.graded(pred, example)
        return {"accuracy": scores[self.reward] * (1.0 if scores["exact"] else self.partial_credit), **scores}
