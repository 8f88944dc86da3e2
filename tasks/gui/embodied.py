"""Embodied inverse dynamics: two consecutive frames of an agent in, the action it took (from a
discrete set) out. The GUI inverse-dynamics idea of UI-Shift (arXiv 2505.12493) applied to any agent
whose action shows.
"""

from __future__ import annotations

import random
from typing import Literal

from tasks import answers
from tasks.base import Example, SkipItem, Task
from tasks.gui.common import FramePair


class EmbodiedInverseDynamics(Task):
    """Show the frames before and after an action and ask which action of the agent's set it was.

    Args:
        labels: ``"letters"``: the actions are listed as lettered options and the answer is a
            letter. ``"names"``: the answer is the action's name (any case).
        shuffle: List the options in a random order per example (letters only), so a position bias
            earns nothing; ``False`` keeps the item's order (a tiny policy then learns a fixed
            letter per action).
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "embodied_inverse_dynamics"
    modality = "frame_pair"
    parts = ("accuracy",)
    levels = {"default": {}}

    def __init__(self, labels: Literal["letters", "names"] = "letters", shuffle: bool = True, **kwargs):
        super().__init__(**kwargs)
        if labels not in ("letters", "names"):
            raise ValueError(f"labels must be 'letters' or 'names', got {labels!r}")
        self.labels = labels
        self.shuffle = shuffle

    def make_example(self, item: FramePair, rng: random.Random) -> Example:
        options = list(item.actions)
        if item.action not in options or len(set(options)) != len(options) or len(options) > 26:
            raise SkipItem(f"{item.name}: action {item.action!r} is not one of {options} (distinct, at most 26)")
        if self.shuffle and self.labels == "letters":
            rng.shuffle(options)
        question = "The first image shows an agent before it acted and the second right after. What did it do?"
        if self.labels == "letters":
            question += "\n" + answers.choice_prompt(options)
        else:
            question += f" It is one of: {', '.join(options)}. Answer with the action's name."
        media = [{"type": "image", "image": frame.convert("RGB")} for frame in (item.before, item.after)]
        return Example(self.user_message(media, question), item.action, self.name, {"options": options})

    def answer_text(self, example: Example) -> str:
        if self.labels == "letters":
            return answers.letter(example.meta["options"].index(example.answer))
        return example.answer

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        options = example.meta["options"]
        if self.labels == "letters":
            chosen = answers.parse_letter(answer, options, self.strict_letters)
        else:
            chosen = answers.parse_choice(answer, options)
        return None if chosen is None else {"accuracy": float(chosen == example.answer)}
