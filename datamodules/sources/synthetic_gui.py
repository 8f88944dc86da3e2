"""`SyntheticGUI`: PIL-drawn phone app screens driven by a small state machine, so GUI tasks need no
data.

Every action leads to a next screen and the accessibility tree is exact: the screen is drawn from
the same nodes the tree lists.
"""

from __future__ import annotations

import colorsys
import random
from dataclasses import dataclass, replace
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from datamodules.sources.base import Source
from tasks.gui.common import ACTION_FIELDS, GUITransition, Node

APPS = ("Mail", "Maps", "Music", "Notes", "Photos", "Shop")
WORDS = ("cat", "map", "sun", "tea", "box", "red", "jazz", "milk", "park", "rain")
ROWS, ITEMS = 4, 8  # visible rows, items per tab
_VIEWS = {  # the screens on which each action type can be taken
    "click": ("home", "list", "detail"),
    "long_press": ("list",),
    "type": ("list",),
    "scroll": ("list",),
    "open_app": ("home",),
    "navigate_back": ("list", "detail"),
    "navigate_home": ("list", "detail"),
    "wait": ("home", "list", "detail"),
}


@dataclass(frozen=True)
class State:
    """What an app screen shows: the app (None: home screen), its tab, the first visible item, the
    search field's text, the item opened in detail (None: the list), the long-pressed item, a
    loading tick."""

    app: int | None = None
    tab: int = 0
    offset: int = 0
    text: str = ""
    detail: int | None = None
    selected: int | None = None
    tick: int = 0

    @property
    def view(self) -> str:
        return "home" if self.app is None else "list" if self.detail is None else "detail"


class SyntheticGUI(Source):
    """Transitions of a synthetic phone: item ``i`` is a pure function of ``(seed, i)``.

    Item ``i`` draws an action type uniformly from ``actions``, a random screen where it can be
    taken, and the action's arguments (a click lands anywhere inside its target). Screens: a home
    screen with a grid of app icons (``open_app`` or a click opens an app); an app with a search
    field (``type`` replaces its text), a list of rows (``scroll`` up/down moves it by one row, a
    click opens the row's detail screen, ``long_press`` highlights the row) and a tab bar (a click
    switches tab); a detail screen with a back button. ``navigate_back`` goes detail -> list ->
    home, ``navigate_home`` goes home, ``wait`` advances the loading bar in the status bar. Nodes
    (the accessibility tree of the screen before) come outermost first. With ``steps`` > 1 the
    second screenshot is taken after ``steps - 1`` more random actions (of any type that can be
    taken on the screen reached), as in GUI-Shift's K-step transitions; the item's action is the
    first.

    Args:
        size: Number of distinct transitions (the length of the source).
        width: Screenshot width in pixels.
        height: Screenshot height in pixels.
        actions: Action types to draw from (see `tasks.gui.common.ACTION_FIELDS`).
        tabs: Tabs per app (at least 2).
        seed: Selects a different family of transitions.
        steps: Actions between the two screenshots (GUI-Shift's K).
    """

    modality = "gui"

    def __init__(
        self,
        size: int = 10000,
        width: int = 112,
        height: int = 196,
        actions: list[str] = list(ACTION_FIELDS),  # noqa: B006, B008
        tabs: int = 3,
        seed: int = 0,
        steps: int = 1,
    ):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if min(width, height) < 28:
            raise ValueError(f"width and height must be >= 28 pixels, got {width} x {height}")
        unknown = sorted(set(actions) - set(ACTION_FIELDS))
        if unknown or not actions:
            raise ValueError(f"actions must be a non-empty list of {list(ACTION_FIELDS)}, got {unknown}")
        if tabs < 2 or steps < 1:
            raise ValueError(f"need tabs >= 2 and steps >= 1, got tabs={tabs}, steps={steps}")
        self.size = size
        self.width = width
        self.height = height
        self.actions = list(actions)
        self.tabs = tabs
        self.seed = seed
        self.steps = steps

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> GUITransition:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticGUI of size {self.size}")
        rng = random.Random(f"synthetic-gui:{self.seed}:{index}")
        kind = rng.choice(self.actions)
        state = self._state(rng, rng.choice(_VIEWS[kind]), kind)
        nodes = self.nodes(state)
        action, after = self._act(rng, state, nodes, kind)
        for _ in range(self.steps - 1):  # the later actions are not answered: any type the screen allows
            later = rng.choice([k for k, views in _VIEWS.items() if after.view in views])
            after = self._act(rng, after, self.nodes(after), later)[1]
        return GUITransition(
            self.render(state), self.render(after), action, nodes, name=self.describe(index), steps=self.steps
        )

    def describe(self, index: int) -> str:
        return f"SyntheticGUI(seed={self.seed})[{index}]"

    def _state(self, rng: random.Random, view: str, kind: str) -> State:
        if view == "home":
            return State(tick=rng.randrange(7))
        state = State(
            app=rng.randrange(len(APPS)),
            tab=rng.randrange(self.tabs),
            offset=rng.randrange(ITEMS - ROWS + 1),
            text=rng.choice(("", "", *WORDS)),
            selected=rng.choice((None, None, *range(ITEMS))),
            tick=rng.randrange(7),
        )
        return replace(state, detail=rng.randrange(ITEMS)) if view == "detail" else state

    def _act(self, rng: random.Random, state: State, nodes: list[Node], kind: str) -> tuple[dict, State]:
        """The action's arguments and the state it leads to."""
        if kind in ("click", "long_press"):
            targets = [n for n in nodes if n.kind in _CLICKABLE[state.view] and (kind == "click" or n.kind == "row")]
            node = rng.choice([n for n in targets if self._click(state, n, kind) != state])
            left, top, right, bottom = node.bounds
            point = {"x": rng.randrange(left, right), "y": rng.randrange(top, bottom)}
            return {"action": kind, **point}, self._click(state, node, kind)
        if kind == "type":
            text = rng.choice([w for w in WORDS if w != state.text])
            return {"action": "type", "text": text}, replace(state, text=text)
        if kind == "scroll":
            down = state.offset == 0 or (state.offset < ITEMS - ROWS and rng.random() < 0.5)
            return {"action": "scroll", "direction": "down" if down else "up"}, replace(
                state, offset=state.offset + (1 if down else -1)
            )
        if kind == "open_app":
            app = rng.randrange(len(APPS))
            return {"action": "open_app", "app": APPS[app]}, State(app=app, tick=state.tick)
        if kind == "navigate_back":
            back = State(tick=state.tick) if state.view == "list" else replace(state, detail=None)
            return {"action": kind}, back
        if kind == "navigate_home":
            return {"action": kind}, State(tick=state.tick)
        return {"action": "wait"}, replace(state, tick=state.tick + 1)

    def _click(self, state: State, node: Node, kind: str) -> State:
        """Where clicking (or long-pressing) ``node`` leads."""
        if node.kind == "icon":
            return State(app=APPS.index(node.text), tick=state.tick)
        if node.kind == "tab":
            return replace(state, tab=_number(node), offset=0, selected=None)
        if node.kind == "button":
            return replace(state, detail=None)
        item = _number(node)
        return replace(state, selected=item) if kind == "long_press" else replace(state, detail=item)

    def nodes(self, state: State) -> list[Node]:
        """The accessibility tree of a screen, outermost first."""
        w = self.width
        h = self.height
        box = lambda x0, y0, x1, y1: (round(x0 * w), round(y0 * h), round(x1 * w), round(y1 * h))  # noqa: E731
        nodes = [Node(box(0, 0, 1, 1), "", "screen"), Node(box(0, 0, 1, 0.06), "", "status_bar")]
        if state.view == "home":
            nodes.append(Node(box(0, 0.1, 1, 0.94), "", "grid"))
            for a, name in enumerate(APPS):
                col = a % 2
                row = a // 2
                nodes.append(
                    Node(box(0.1 + 0.45 * col, 0.13 + 0.27 * row, 0.45 + 0.45 * col, 0.36 + 0.27 * row), name, "icon")
                )
            return nodes
        if state.view == "detail":
            return nodes + [
                Node(box(0, 0.06, 1, 0.16), self.item_text(state, state.detail), "app_bar"),
                Node(box(0.02, 0.07, 0.2, 0.15), "Back", "button"),
                Node(box(0.05, 0.2, 0.95, 0.8), self.item_text(state, state.detail), "panel"),
            ]
        nodes += [
            Node(box(0, 0.06, 1, 0.16), APPS[state.app], "app_bar"),
            Node(box(0.05, 0.18, 0.95, 0.27), state.text or "Search", "text_field"),
            Node(box(0, 0.29, 1, 0.29 + 0.14 * ROWS), "", "list"),
        ]
        nodes += [
            Node(box(0, 0.29 + 0.14 * r, 1, 0.43 + 0.14 * r), self.item_text(state, state.offset + r), "row")
            for r in range(ROWS)
        ]
        nodes.append(Node(box(0, 0.87, 1, 1), "", "tab_bar"))
        nodes += [
            Node(box(t / self.tabs, 0.87, (t + 1) / self.tabs, 1), f"Tab {t + 1}", "tab") for t in range(self.tabs)
        ]
        return nodes

    def item_text(self, state: State, item: int) -> str:
        return f"{WORDS[(state.app * 7 + state.tab * 3 + item) % len(WORDS)]} {item + 1}"

    def render(self, state: State) -> Image.Image:
        """The screenshot of a state, drawn from its nodes."""
        image = Image.new("RGB", (self.width, self.height), (245, 245, 245))
        draw = ImageDraw.Draw(image)
        for node in self.nodes(state):
            self._draw(draw, state, node)
        return image

    def _draw(self, draw: ImageDraw.ImageDraw, state: State, node: Node) -> None:
        left, top, right, bottom = node.bounds
        fill = self._fill(state, node)
        if fill is not None:
            draw.rectangle((left, top, right - 1, bottom - 1), fill=fill, outline=_outline(node))
        if node.kind == "status_bar":  # the loading bar: what `wait` changes
            draw.rectangle((left, top, left + (right - left) * (state.tick + 1) // 8, bottom - 1), fill=(250,) * 3)
        if node.kind == "row":  # an icon in the item's colour
            side = bottom - top - 4
            draw.rectangle(
                (left + 2, top + 2, left + 2 + side, top + 2 + side), fill=self._item_colour(state, _number(node))
            )
        if node.text and node.kind not in ("tab", "panel"):
            ink = (120, 120, 120) if node.kind == "text_field" and not state.text else (20, 20, 20)
            indent = bottom - top if node.kind == "row" else 2
            draw.text((left + indent, top + 1), node.text, fill=ink, font=_font(max(6, self.height // 20)))

    def _fill(self, state: State, node: Node) -> tuple[int, int, int] | None:
        app_colour = _colour(0 if state.app is None else state.app / len(APPS), 0.7, 0.8)
        if node.kind == "status_bar":
            return (40, 40, 40)
        if node.kind in ("app_bar", "icon"):
            return app_colour if node.kind == "app_bar" else _colour(APPS.index(node.text) / len(APPS), 0.7, 0.8)
        if node.kind == "tab":
            return app_colour if _number(node) == state.tab else (200, 200, 200)
        if node.kind == "row":
            return (250, 225, 120) if _number(node) == state.selected else (255, 255, 255)
        if node.kind == "panel":
            return self._item_colour(state, state.detail)
        return {"text_field": (255, 255, 255), "button": (255, 255, 255)}.get(node.kind)

    def _item_colour(self, state: State, item: int) -> tuple[int, int, int]:
        return _colour(((state.app or 0) * 0.17 + state.tab * 0.31 + item * 0.113) % 1.0, 0.6, 0.9)


_CLICKABLE = {"home": ("icon",), "list": ("tab", "row"), "detail": ("button",)}


def _number(node: Node) -> int:
    """The 0-based item of a row or tab node: its text ends with the 1-based number (see
    `nodes`)."""
    return int(node.text.split()[-1]) - 1


def _colour(hue: float, saturation: float, value: float) -> tuple[int, int, int]:
    return tuple(round(c * 255) for c in colorsys.hsv_to_rgb(hue, saturation, value))


def _outline(node: Node) -> tuple[int, int, int] | None:
    return (150, 150, 150) if node.kind in ("text_field", "row", "button") else None


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.ImageFont:
    return ImageFont.load_default(size=size)
