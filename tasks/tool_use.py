"""What every task whose policy may call tools shares: the transcript rules, a ``grounding`` part
for where the first call aims and the expert transcript.

``grounding`` is shaping for small policies, weighted by each task's ``grounding_weight``: MGPO
(arXiv 2507.05920) pays the final answer alone and finds grounding emerges, which
``grounding_weight: 0`` reproduces.

A transcript earns nothing unless each turn before the last is one well-formed call that can run
and the last is an answer; it may answer at once. Asked without tools (the control arm), the same
examples take a single answer turn.
"""

from __future__ import annotations

from abc import abstractmethod

from tasks.base import Example, Reward, Task
from tasks.grounding import box_iou
from tasks.tools.base import Call, Toolbox, ToolError, read_turn, transcript, turns_of
from tasks.tools.crop_zoom import SHOWN_SIZE, CropZoom, shown_box


class ToolUseTask(Task):
    """A task whose policy may call the tools of its ``toolbox`` before it answers; subclasses set
    it with `set_toolbox`, name the calls an expert makes (`expert_calls`), score the first call
    (`grounding`) and list ``"grounding"`` in ``parts``."""

    grounding_weight: float = 0.0

    def set_toolbox(self, toolbox: Toolbox | None, grounding_weight: float) -> None:
        """Offer ``toolbox`` (None: the answer in one turn, no tool) and weigh the ``grounding``
        part by ``grounding_weight`` in the total (it is 0 with no toolbox)."""
        if grounding_weight < 0:
            raise ValueError(f"grounding_weight must be >= 0, got {grounding_weight}")
        self.toolbox, self.grounding_weight = toolbox, grounding_weight

    @property
    def max_reward(self) -> float:
        return super().max_reward + (self.grounding_weight if self.toolbox is not None else 0.0)

    @abstractmethod
    def expert_calls(self, example: Example) -> list[str]:
        """The call turns an expert writes before answering (with the tool's tags)."""

    @abstractmethod
    def grounding(self, example: Example, calls: list[Call]) -> float | None:
        """How well the calls aim at what the question is about, in [0, 1] (0 with no call); None
        when one of them cannot run on the example."""

    def read(self, completion: str) -> tuple[list[Call], str] | None:
        """The calls and the answer turn of a transcript; None when it breaks the rules: more turns
        than allowed, a turn before the last that is not one well-formed call, a last turn that is
        not an answer."""
        turns = turns_of(completion)
        tools = self.toolbox.tools if self.toolbox is not None else ()
        if len(turns) > (self.toolbox.max_turns if self.toolbox is not None else 1):
            return None
        actions = [read_turn(turn, tools) for turn in turns]
        if actions[-1].kind != "answer" or any(action.kind != "call" for action in actions[:-1]):
            return None
        return [action.call for action in actions[:-1]], turns[-1]

    def extract_answer(self, completion: str) -> str | None:
        read = self.read(completion)
        return None if read is None else super().extract_answer(read[1])

    def verify(self, example: Example, completion: str) -> Reward:
        """The answer turn's reward plus the weighted ``grounding``; nothing for a transcript that
        breaks the rules (`read`)."""
        read = self.read(completion)
        grounding = None if read is None else self.grounding(example, read[0])
        if grounding is None:
            parts = dict.fromkeys((*self.parts, "format"), 0.0)
            if self.repetition_penalty > 0:
                parts["repetition"] = 0.0
            return Reward(total=0.0, parts=parts)
        reward = super().verify(example, read[1])
        reward.parts["grounding"] = grounding
        reward.total += self.grounding_weight * grounding
        return reward

    def render_answer(self, example: Example) -> str:
        """The expert's calls, then the answer (the answer alone with no toolbox)."""
        return self._after_calls(example, super().render_answer(example))

    def demonstration(self, example: Example) -> str:
        reasoning = self.reasoning(example) if self.think else ""
        if not reasoning:  # the base's demonstration is then render_answer, calls included
            return self.render_answer(example)
        return self._after_calls(example, super().demonstration(example))

    def _after_calls(self, example: Example, answer: str) -> str:
        if self.toolbox is None:
            return answer
        return transcript([*self.expert_calls(example), answer])


def times(calls: int) -> str:
    """How often a prompt says a tool may be called: ``once`` or ``up to 3 times``."""
    return "once" if calls == 1 else f"up to {calls} times"


def crop_offer(calls: int) -> str:
    """The prompt's sentence offering `tasks.CropZoom` ``calls`` times."""
    return (
        f"Before answering you may zoom in {times(calls)}: reply with only {CropZoom.syntax}, the left, top, "
        "right and bottom edges of a box in pixels of this image, and you will be shown that region at full "
        "resolution."
    )


def crop_grounding(example: Example, calls: list[Call], covered: bool = False) -> float | None:
    """The IoU of the first crop, clamped to the shown image, with ``example.meta["box"]`` (shown
    pixels), or with ``covered`` the share of that box inside the crop; 0 with no crop, None when a
    crop cannot run."""
    try:
        boxes = [shown_box(call.args, example.meta[SHOWN_SIZE]) for call in calls]
    except ToolError:
        return None
    if not boxes:
        return 0.0
    return box_coverage(boxes[0], example.meta["box"]) if covered else box_iou(boxes[0], example.meta["box"])


def box_coverage(crop: list[float], box: list[float]) -> float:
    """The share of ``box``'s area inside ``crop`` (both ``[x1, y1, x2, y2]``)."""
    width = max(0.0, min(crop[2], box[2]) - max(crop[0], box[0]))
    height = max(0.0, min(crop[3], box[3]) - max(crop[1], box[1]))
    area = (box[2] - box[0]) * (box[3] - box[1])
    return width * height / area if area > 0 else 0.0
