"""The items GUI and embodied tasks consume: a GUI transition (two screenshots, the action between
them, the accessibility tree of the first) and a frame pair (two frames, one action from a discrete
set), plus the one action schema every GUI source and task shares.

Action schema (AndroidControl's action space under short names): ``{"action": "click", "x": 10, "y":
20}``, ``long_press`` (``x``, ``y``), ``type`` (``text``), ``scroll`` (``direction``:
up/down/left/right, the way the finger moves the content into view: ``down`` shows what is below),
``open_app`` (``app``), ``navigate_back``, ``navigate_home``, ``wait``. Coordinates are pixels of
the screenshot, from its top-left corner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from PIL import Image

ACTION_FIELDS: dict[str, tuple[str, ...]] = {
    "click": ("x", "y"),
    "long_press": ("x", "y"),
    "type": ("text",),
    "scroll": ("direction",),
    "open_app": ("app",),
    "navigate_back": (),
    "navigate_home": (),
    "wait": (),
}
DIRECTIONS = ("up", "down", "left", "right")
# AndroidControl's names for the same actions and fields
_ALIASES = {"action_type": "action", "input_text": "type", "app_name": "app"}


@dataclass(frozen=True)
class Node:
    """One accessibility-tree node of a screenshot.

    Attributes:
        bounds: ``(left, top, right, bottom)`` in screenshot pixels, edges included.
        text: What the node shows or its content description ("Settings", "Search").
        kind: Its role or class ("button", "tab", "row", "text_field", ...).
    """

    bounds: tuple[int, int, int, int]
    text: str = ""
    kind: str = ""

    @property
    def area(self) -> int:
        left, top, right, bottom = self.bounds
        return max(0, right - left) * max(0, bottom - top)

    def contains(self, x: float, y: float) -> bool:
        """Whether the point lies inside the box or on its edge."""
        left, top, right, bottom = self.bounds
        return left <= x <= right and top <= y <= bottom


@dataclass
class GUITransition:
    """A GUI transition: the screen before an action, the action, and the screen after it (or after
    ``steps`` actions, the first of which is ``action``: GUI-Shift's K-step transition, arXiv
    2505.12493).

    Attributes:
        before: Screenshot before the action (RGB).
        after: Screenshot after the action (after the last of ``steps`` actions), the same size.
        action: The (first) action in the schema of this module (see `check_action`).
        nodes: Accessibility-tree nodes of ``before``, outermost first; None when none was recorded.
        name: Where it came from (episode and step, or a synthetic id), for logs.
        steps: Actions between ``before`` and ``after``, at least 1.
    """

    before: Image.Image
    after: Image.Image
    action: dict
    nodes: list[Node] | None = None
    name: str = ""
    steps: int = 1

    @property
    def screen_size(self) -> tuple[int, int]:
        """``(width, height)`` of the screenshots, the space the coordinates live in."""
        return self.before.size


@dataclass
class FramePair:
    """Two consecutive observations of an agent and the discrete action taken between them.

    Attributes:
        before: Frame before the action (RGB).
        after: Frame after the action.
        action: The action taken, one of ``actions``.
        actions: The agent's action set, in a fixed order.
        name: Where it came from, for logs.
    """

    before: Image.Image
    after: Image.Image
    action: str
    actions: tuple[str, ...] = field(default_factory=tuple)
    name: str = ""


def smallest_node(nodes: list[Node], x: float, y: float) -> Node | None:
    """The node of least area containing the point (the innermost element, as UI-Shift labels
    clicks)."""
    inside = [node for node in nodes if node.contains(x, y)]
    return min(inside, key=lambda node: node.area, default=None)


def check_action(raw: dict) -> dict:
    """The action ``raw`` describes, in this module's schema: AndroidControl names (``action_type``,
    ``input_text``, ``app_name``) are accepted, keys are put in schema order and anything extra is
    dropped.

    Raises:
        ValueError: Unknown type, a missing field, or a field of the wrong type.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"an action is a JSON object, got {type(raw).__name__}")
    action = {_ALIASES.get(key, key): value for key, value in raw.items()}
    kind = _ALIASES.get(action.get("action"), action.get("action"))
    if kind not in ACTION_FIELDS:
        raise ValueError(f"unknown action {kind!r}; known: {sorted(ACTION_FIELDS)}")
    out = {"action": kind}
    for name in ACTION_FIELDS[kind]:
        if name not in action:
            raise ValueError(f"a {kind} action needs {name!r}, got {sorted(action)}")
        out[name] = _field(kind, name, action[name])
    return out


def _field(kind: str, name: str, value):
    if name in ("x", "y"):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{kind} {name} must be a finite number, got {value!r}")
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{kind} {name} must be a non-empty string, got {value!r}")
    if name == "direction" and value.lower() not in DIRECTIONS:
        raise ValueError(f"scroll direction must be one of {DIRECTIONS}, got {value!r}")
    return value.lower() if name == "direction" else value
