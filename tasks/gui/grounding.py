"""GUI grounding (ScreenSpot-style): an instruction naming one element and a screenshot in, a click
point out.

The reward is point-in-box: the click must land inside the element's accessibility bounds (edges
count).
"""

from __future__ import annotations

import random
import re

from tasks.base import Example, SkipItem, Task
from tasks.gui.common import GUITransition, Node
from tasks.regions import Region

# matched on the stripped answer: no two quantifiers compete for the same spaces, so no backtracking
_POINT = re.compile(r"\(?\s*(\d{1,6}(?:\.\d{1,6})?)\s*,\s*(\d{1,6}(?:\.\d{1,6})?)\s*\)?")


class GUIGrounding(Task):
    """Pick one labelled element of a screenshot's accessibility tree and ask where to click to
    reach it.

    The answer is a point ``(x, y)`` in screenshot pixels (from the top-left corner); it earns
    accuracy when it lies inside the element's bounds. Only the first screenshot of the item is
    shown.

    Args:
        kinds: Roles an element may have to be a target (e.g. ``[button, tab]``); ``None`` allows
            any node with text that contains no other node with text (so the target is one element,
            not a container).
        min_side: Elements narrower or shorter than this many pixels are never targets.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "gui_grounding"
    modality = "gui"
    parts = ("accuracy",)
    levels = {"default": {}}

    def __init__(self, kinds: list[str] | None = None, min_side: int = 2, **kwargs):
        super().__init__(**kwargs)
        if min_side < 1:
            raise ValueError(f"min_side must be >= 1, got {min_side}")
        self.kinds = None if kinds is None else set(kinds)
        self.min_side = min_side

    def make_example(self, item: GUITransition, rng: random.Random) -> Example:
        width, height = item.screen_size
        targets = self.targets(item.nodes or [], (width, height))
        if not targets:
            raise SkipItem(f"{item.name}: no labelled element on the screenshot to ground")
        node = rng.choice(targets)
        question = (
            f'Where would you click to use the {node.kind or "element"} labelled "{node.text}"? The '
            f"screenshot is {width} x {height} pixels. Answer with the point as (x, y), x from the left "
            "edge and y from the top."
        )
        media = [{"type": "image", "image": item.before.convert("RGB")}]
        meta = {"box": list(node.bounds), "text": node.text, "screen": [width, height]}
        return Example(self.user_message(media, question), _centre(node), self.name, meta)

    def targets(self, nodes: list[Node], screen: tuple[int, int]) -> list[Node]:
        """The nodes that may be asked for, cut to the part of them on the ``(width, height)``
        screen (a click off the screenshot can never be right): labelled, large enough there, of an
        allowed kind, and no container of another labelled node."""
        shown = [_on_screen(n, screen) for n in nodes]
        labelled = [n for n in shown if n.text.strip() and min(_sides(n)) >= self.min_side]
        if self.kinds is not None:
            return [n for n in labelled if n.kind in self.kinds]
        return [n for n in labelled if not any(o is not n and _encloses(n, o) for o in labelled)]

    def answer_text(self, example: Example) -> str:
        x, y = example.answer
        return f"({x}, {y})"

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        point = self.region(example, answer)
        if point is None:
            return None
        return {"accuracy": float(Node(tuple(example.meta["box"])).contains(point[0], point[1]))}

    def parse_answer(self, example: Example, answer: str) -> Region | None:
        """The clicked point (``(12, 30)`` and ``(12.0,30)`` are one point), as a ballot that
        majority voting counts by overlap (`tasks.regions.region_winner`)."""
        point = self.region(example, answer)
        return None if point is None else Region(tuple(point), *self.bounds(example))

    def region(self, example: Example, answer: str | None) -> list[float] | None:
        """The clicked point as a region ``[x, y, x, y]``, or None for an invalid answer or a point
        off the screen (what `tasks.RegionConsistency` votes with)."""
        match = _POINT.fullmatch((answer or "").strip())
        if not match:
            return None
        x = float(match[1])
        y = float(match[2])
        width, height = self.bounds(example)
        return None if x > width or y > height else [x, y, x, y]

    def bounds(self, example: Example) -> tuple[int, int]:
        """``(width, height)`` of the space answers live in: the screenshot's pixels."""
        width, height = example.meta["screen"]
        return int(width), int(height)


def _sides(node: Node) -> tuple[int, int]:
    left, top, right, bottom = node.bounds
    return right - left, bottom - top


def _on_screen(node: Node, screen: tuple[int, int]) -> Node:
    """The node with its bounds clipped to the screen (inverted bounds when none of it is on the
    screen)."""
    left, top, right, bottom = node.bounds
    width, height = screen
    return Node((max(left, 0), max(top, 0), min(right, width), min(bottom, height)), node.text, node.kind)


def _encloses(outer: Node, inner: Node) -> bool:
    a = outer.bounds
    b = inner.bounds
    return a[0] <= b[0] and a[1] <= b[1] and a[2] >= b[2] and a[3] >= b[3]


def _centre(node: Node) -> list[int]:
    left, top, right, bottom = node.bounds
    return [(left + right) // 2, (top + bottom) // 2]
