"""GUI inverse dynamics: two screenshots in, the action that led from the first to the second out.

Follows UI-Shift (arXiv 2505.12493): the answer is one JSON action; a click counts when it lands
inside the smallest accessibility node containing the recorded click, typed text and scroll
direction must match, and a format reward is added (acc + fmt in the paper). A transition of several
actions (GUI-Shift's K-step transition: the source's ``steps``) asks for the first of them. The
``letter`` output asks only for the action type, as one letter, which a tiny random-init policy can
learn (configs/gui_demo.yaml).
"""

from __future__ import annotations

import json
import math
import random
import unicodedata
from typing import Literal

from PIL import Image

from tasks import answers
from tasks.base import Example, SkipItem, Task
from tasks.gui.common import ACTION_FIELDS, GUITransition, Node, check_action, smallest_node

_TEMPLATES = {
    "click": '{"action": "click", "x": <x>, "y": <y>}',
    "long_press": '{"action": "long_press", "x": <x>, "y": <y>}',
    "type": '{"action": "type", "text": "<text>"}',
    "scroll": '{"action": "scroll", "direction": "<up|down|left|right>"}',
    "open_app": '{"action": "open_app", "app": "<app name>"}',
}


class GUIInverseDynamics(Task):
    """Show the screenshots before and after a GUI action (or ``item.steps`` actions: then the first
    is asked for) and ask for the action.

    ``json`` output: one JSON object in the schema of `tasks.gui.common` (``{"action": "click", "x":
    12, "y": 30}``). It is parsed with ``json.loads`` only; it must hold exactly the keys of its
    action type (an extra or missing key, a duplicate key, a non-number coordinate or a point
    outside the screenshot makes the answer invalid: no accuracy, no format reward). Accuracy needs
    the right type and: for a click or long press, a point inside the smallest accessibility node
    holding the recorded point (edges count), or within ``click_radius`` of it when there is no tree
    or no node holds it; for ``type`` the same text after Unicode NFKC, case folding and whitespace
    collapsing; for ``scroll`` the direction; for ``open_app`` the app name, normalised like text.
    ``action_type`` logs whether the type alone was right.

    Args:
        output: ``"json"`` (UI-Shift) or ``"letter"``: the action types are listed as lettered
            options in the order of ``action_types`` and the answer is the letter of the type.
        action_types: The action types this task uses; transitions with other actions are skipped.
        scales: Both screenshots (and the coordinates) are resized by a factor drawn from this list,
            so the policy sees several resolutions; ``[1.0]`` keeps them as recorded.
        click_radius: Tolerance of a click without a containing node, as a fraction of the
            screenshot's shorter side.
        type_credit: Accuracy paid for the right action type with wrong arguments (0 in UI-Shift).
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "gui_inverse_dynamics"
    modality = "gui"
    parts = ("accuracy", "action_type")
    levels = {"type": {"output": "letter"}, "action": {"output": "json"}}

    def __init__(
        self,
        output: Literal["json", "letter"] = "json",
        action_types: list[str] = list(ACTION_FIELDS),  # noqa: B006, B008  (never mutated)
        scales: list[float] = [1.0, 0.75, 0.5],  # noqa: B006
        click_radius: float = 0.05,
        type_credit: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if output not in ("json", "letter"):
            raise ValueError(f"output must be 'json' or 'letter', got {output!r}")
        unknown = sorted(set(action_types) - set(ACTION_FIELDS))
        if unknown or len(set(action_types)) != len(action_types) or len(action_types) < 2:
            raise ValueError(f"action_types must be >= 2 distinct of {list(ACTION_FIELDS)}, got {action_types}")
        if not scales or not all(0 < s <= 4 for s in scales):
            raise ValueError(f"scales must be a non-empty list of factors in (0, 4], got {scales}")
        if not 0 <= click_radius <= 1 or not 0 <= type_credit <= 1:
            raise ValueError(f"click_radius and type_credit must be in [0, 1], got {click_radius}, {type_credit}")
        self.output = output
        self.action_types = list(action_types)
        self.scales = list(scales)
        self.click_radius = click_radius
        self.type_credit = type_credit

    def make_example(self, item: GUITransition, rng: random.Random) -> Example:
        try:
            action = check_action(item.action)
        except ValueError as err:
            raise SkipItem(f"{item.name}: {err}") from err
        if action["action"] not in self.action_types:
            raise SkipItem(f"{item.name}: action {action['action']!r} is not among {self.action_types}")
        width, height = item.screen_size
        if "x" in action and not (0 <= action["x"] <= width and 0 <= action["y"] <= height):
            raise SkipItem(f"{item.name}: the recorded point ({action['x']}, {action['y']}) is off the screen")
        scale = rng.choice(self.scales)
        size = max(1, round(width * scale)), max(1, round(height * scale))
        fx = size[0] / width
        fy = size[1] / height
        nodes = None if item.nodes is None else [_scale_node(node, fx, fy) for node in item.nodes]
        if "x" in action:
            action |= {"x": round(action["x"] * fx), "y": round(action["y"] * fy)}
        node = smallest_node(nodes or [], action["x"], action["y"]) if "x" in action else None
        before, after = (_resize(image, size) for image in (item.before, item.after))
        media = [{"type": "image", "image": before}, {"type": "image", "image": after}]
        meta = {
            "screen": list(size),
            "box": None if node is None else list(node.bounds),
            "radius": self.click_radius * min(size),
            "scale": scale,
            "steps": item.steps,
        }
        return Example(self.user_message(media, self._question(size, item.steps)), action, self.name, meta)

    def _question(self, size: tuple[int, int], steps: int) -> str:
        if steps == 1:
            question = "Which action led from the first screenshot to the second?"
            shown = "The first shows a screen before one GUI action, the second the screen right after it."
        else:
            question = f"The second screenshot was taken {steps} GUI actions after the first. Which was the first?"
            shown = "The first shows the screen before those actions, the second the screen after the last."
        if self.output == "letter":
            return f"{question}\n{answers.choice_prompt(self.action_types)}"
        forms = "\n".join(_TEMPLATES.get(kind, f'{{"action": "{kind}"}}') for kind in self.action_types)
        return (
            f"{question} {shown} Both are {size[0]} x {size[1]} pixels; x counts from the left edge, y from "
            f"the top. Answer with exactly one JSON object of one of these forms:\n{forms}"
        )

    def answer_text(self, example: Example) -> str:
        if self.output == "letter":
            return answers.letter(self.action_types.index(example.answer["action"]))
        return json.dumps(example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        if self.output == "letter":
            kind = answers.parse_letter(answer, self.action_types, self.strict_letters)
            return None if kind is None else dict.fromkeys(self.parts, float(kind == example.answer["action"]))
        pred = parse_action(answer, example.meta["screen"])
        if pred is None:
            return None
        right_type = pred["action"] == example.answer["action"]
        if not right_type:
            return {"accuracy": 0.0, "action_type": 0.0}
        exact = _arguments_match(pred, example.answer, example.meta)
        return {"accuracy": 1.0 if exact else self.type_credit, "action_type": 1.0}

    def parse_answer(self, example: Example, answer: str) -> tuple | None:
        """The action type and its fields, texts normalised as they are compared (`normalise_text`):
        a JSON answer's layout and key order make no other answer. In ``letter`` output, the
        letter."""
        if self.output == "letter":
            return super().parse_answer(example, answer)
        pred = parse_action(answer, example.meta["screen"])
        if pred is None:
            return None
        return tuple(v if k in ("x", "y") else normalise_text(v) for k, v in pred.items())


def parse_action(answer: str, screen: list[int]) -> dict | None:
    """The action a JSON answer states, or None unless it is one object with exactly the keys of a
    known action type, valid values and a point on the ``screen = [width, height]``."""
    try:
        raw = json.loads(answer, object_pairs_hook=_unique_keys, parse_constant=_reject)
        action = check_action(raw)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    if set(raw) != set(action):  # extra keys, or AndroidControl aliases instead of the schema's names
        return None
    if "x" in action and not (0 <= action["x"] <= screen[0] and 0 <= action["y"] <= screen[1]):
        return None
    return action


def normalise_text(text: str) -> str:
    """Text compared for typing and app names: NFKC, case-folded, runs of whitespace as one
    space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _arguments_match(pred: dict, truth: dict, meta: dict) -> bool:
    kind = truth["action"]
    if kind in ("click", "long_press"):
        if meta["box"] is not None:
            return Node(tuple(meta["box"])).contains(pred["x"], pred["y"])
        return (pred["x"] - truth["x"]) ** 2 + (pred["y"] - truth["y"]) ** 2 <= meta["radius"] ** 2
    return all(normalise_text(str(pred[name])) == normalise_text(str(truth[name])) for name in ACTION_FIELDS[kind])


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate keys in {keys}")
    return dict(pairs)


def _reject(constant: str):
    raise ValueError(f"{constant} is not a number")


def _scale_node(node: Node, fx: float, fy: float) -> Node:
    """The node on the resized screenshot, rounded outwards so every rounded point inside stays
    inside."""
    left, top, right, bottom = node.bounds
    bounds = (math.floor(left * fx), math.floor(top * fy), math.ceil(right * fx), math.ceil(bottom * fy))
    return Node(bounds, node.text, node.kind)


def _resize(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    image = image.convert("RGB")
    return image.copy() if image.size == size else image.resize(size, Image.Resampling.BILINEAR)
