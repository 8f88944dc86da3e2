"""SRL's step-wise expert reward over an ordering task (Deng et al. 2025, "Supervised Reinforcement
Learning: From Expert Trajectories to Step-wise Reasoning", arXiv 2510.25992): the expert's answer
is cut into steps, the prompt gives the steps before step k and asks for step k alone, and the
reward is the similarity of the policy's step to the expert's.
"""

from __future__ import annotations

import difflib
import random
from typing import Any

from tasks import answers
from tasks.base import Example, SkipItem, Task
from tasks.image.jigsaw import Jigsaw
from tasks.order import OrderTask


def similarity(a: str, b: str) -> float:
    """SRL's sequence-similarity reward ``R = 2 M / T``: ``M`` elements in the matching blocks of
    the two sequences, ``T`` elements in both (`difflib.SequenceMatcher.ratio`), in [0, 1]."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


class ExpertSteps(Task):
    """An ordering task (any `tasks.OrderTask` answered as a list of numbers: image, video, audio
    and point-cloud jigsaws, patch reordering, depth orders) turned into SRL's step-wise task.

    The expert's answer ``a_1, ..., a_K`` is a sequence of K steps, step j being "position j takes
    piece a_j". Each example draws k from 1 to K - 1 (the last step follows from the others), shows
    the wrapped task's prompt with the expert's first k - 1 steps, and asks for step k alone: one
    number. Its reward is SRL's ``r = R(step, expert step)`` (`similarity` of the two numbers as
    text, which for labels below 10 is 1 for the expert's label and 0 for any other) when the answer
    is a valid step (one label of 1..K), and ``-format_penalty`` otherwise (SRL pays -1). ``exact``
    logs whether the step is the expert's. The task is named after the one it wraps
    (``jigsaw_steps``) and takes its items.

    Args:
        task: The ordering task whose answers are cut into steps; None takes `tasks.Jigsaw` with its
            defaults. Its answer format options only shape the prompt it writes; this task's own
            ones apply.
        format_penalty: Subtracted from the reward of a completion with no valid step (SRL's -1 is
            1.0); 0 keeps every reward in [0, max_reward] as other tasks do.
        **kwargs: Answer format options of this task, see `tasks.Task`.
    """

    name = "expert_steps"
    modality = "image"  # that of the default task; an instance takes its task's
    parts = ("accuracy", "exact")
    levels = {"default": {}}

    def __init__(self, task: OrderTask | None = None, format_penalty: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        task = Jigsaw() if task is None else task
        if not isinstance(task, OrderTask) or task.style != "order":
            raise ValueError(
                f"ExpertSteps takes an ordering task answered as a list of numbers (a tasks.OrderTask "
                f"with style 'order'), got {type(task).__name__}"
            )
        if format_penalty < 0:
            raise ValueError(f"format_penalty must be >= 0, got {format_penalty}")
        self.task = task
        self.format_penalty = format_penalty
        self.name = f"{task.name}_steps"
        self.modality = task.modality
        self.partners = task.partners

    def make_example(self, item: Any, rng: random.Random) -> Example:
        base = self.task.make_example(item, rng)
        order = list(base.answer)
        if len(order) < 2:
            raise SkipItem(f"{self.task.name}: an answer of {len(order)} step has nothing to cut")
        step = rng.randrange(1, len(order))  # 1-based: the last step is left out, the others fix it
        meta = {"pieces": len(order), "step": step, "given": order[: step - 1], "order": order, "task": base.meta}
        return Example(self._messages(base, meta), order[step - 1], self.name, meta)

    def _messages(self, base: Example, meta: dict) -> list[dict]:
        """The wrapped task's prompt, its format instruction replaced by the expert's first steps,
        the request for the next one and this task's instruction."""
        *rest, last = base.messages[-1]["content"]
        text = last["text"].removesuffix(self.task.instruction()).rstrip()
        step = meta["step"]
        given = meta["given"]
        shown = f"The first {step - 1} numbers of that answer are: {answers.order_text(given)}. " if given else ""
        ask = f"{shown}Give only number {step} of the answer: one number from 1 to {meta['pieces']}."
        content = [*rest, {"type": "text", "text": f"{text}\n{ask}\n{self.instruction()}"}]
        return [*base.messages[:-1], {"role": base.messages[-1]["role"], "content": content}]

    def answer_text(self, example: Example) -> str:
        return str(example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        label = self.parse_answer(example, answer)
        if label is None:
            return None
        return {"accuracy": similarity(str(label), str(example.answer)), "exact": float(label == example.answer)}

    def parse_answer(self, example: Example, answer: str) -> int | None:
        """The step's label, one of ``1..K`` (``3``, ``+3`` and ``03`` are one label)."""
        label = answers.parse_int(answer)
        return label if label is not None and 1 <= label <= example.meta["pieces"] else None

    def total(self, parts: dict[str, float]) -> float:
        return super().total(parts) - self.format_penalty * (1.0 - parts["format"])
