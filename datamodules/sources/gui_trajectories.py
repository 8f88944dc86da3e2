"""`GUITrajectories`: GUI episodes in the AndroidControl layout (screenshots, actions, accessibility
trees) as transitions, for GUI inverse dynamics (UI-Shift) and grounding."""

from __future__ import annotations

from pathlib import Path

from datamodules.sources.base import Source
from datamodules.sources.jsonl import RowSkips, episodes, inside, load_rgb
from datamodules.sources.limits import MAX_IMAGE_PIXELS, MAX_LINE_BYTES, check_limit
from tasks import SkipItem
from tasks.gui.common import GUITransition, Node, check_action


class GUITrajectories(Source):
    """Every step of every episode of a JSONL file: screenshot ``t``, action ``t``, screenshot ``t +
    steps`` (``steps`` 1: one transition; more: GUI-Shift's K-step transitions, whose answer is the
    first action).

    One episode per line::

        {"episode_id": 7, "screenshots": ["epi7/0.png", "epi7/1.png", "epi7/2.png"],
         "actions": [{"action_type": "click", "x": 540, "y": 1200}, {"action_type": "scroll",
         "direction": "down"}], "accessibility_trees": [[{"bounds": [0, 0, 1080, 2400], "text": "",
         "class": "FrameLayout"}, ...], ...]}

    Actions use the schema of `tasks.gui.common` or AndroidControl's names (``action_type``,
    ``input_text``, ``app_name``). ``accessibility_trees`` is optional (one list of nodes per
    screenshot; a node has ``bounds`` ``[left, top, right, bottom]`` or AndroidControl's
    ``bbox_pixels``, and optional ``text`` / ``content_description`` and ``class`` /
    ``class_name``). Screenshot paths are relative to the folder of the file and may not lead
    outside it. Steps with a missing field, a bad action or tree, or a path that escapes the folder
    or names no file are skipped when the file is read, counted in ``skipped`` and logged once; a
    screenshot that cannot be decoded raises `tasks.SkipItem` (the data module skips and logs it).
    An episode with fewer than ``steps`` actions gives no item and is counted as skipped.

    Args:
        path: The JSONL file.
        steps: Actions between the two screenshots of an item (GUI-Shift's K, 1 to 4 in the paper);
            only the first is answered, the later ones need not be valid actions.
        max_image_pixels: Most pixels of a screenshot; a larger one skips its item, unread.
        max_line_bytes: Most bytes of one line (episode); a longer one is skipped, never held whole.
    """

    modality = "gui"

    def __init__(
        self, path: str, steps: int = 1, max_image_pixels: int = MAX_IMAGE_PIXELS, max_line_bytes: int = MAX_LINE_BYTES
    ):
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.max_image_pixels = check_limit(max_image_pixels, "max_image_pixels")
        check_limit(max_line_bytes, "max_line_bytes")
        self.root, rows = episodes(path, "GUITrajectories", max_line_bytes)
        self.steps = steps
        self.transitions: list[tuple[Path, Path, dict, list[Node] | None, str]] = []
        skips = RowSkips("GUITrajectories", path)
        for line, row in rows:
            for t in range(_num_windows(row, line, skips, steps)):
                try:
                    self.transitions.append(self._step(row, t, line))
                except Exception as err:  # whatever a malformed step raises (IndexError, OverflowError, ...)
                    skips.add(line, f"{type(err).__name__}: step {t}: {str(err)[:200]}")
        skips.report()
        self.skipped = skips.count
        if not self.transitions:
            raise ValueError(f"GUITrajectories: no usable step in {path!r} ({self.skipped} skipped)")

    def _step(self, row: dict, t: int, line: int) -> tuple[Path, Path, dict, list[Node] | None, str]:
        shots = row["screenshots"]
        before = inside(self.root, shots[t])
        after = inside(self.root, shots[t + self.steps])
        trees = row.get("accessibility_trees")
        nodes = None if trees is None or trees[t] is None else [_node(raw) for raw in trees[t]]
        later = f" to {t + self.steps}" if self.steps > 1 else ""
        name = f"episode {row.get('episode_id', f'on line {line}')} step {t}{later}"
        return before, after, check_action(row["actions"][t]), nodes, name

    def __len__(self) -> int:
        return len(self.transitions)

    def __getitem__(self, index: int) -> GUITransition:
        before, after, action, nodes, name = self.transitions[index]
        first, second = (load_rgb(path, self.max_image_pixels) for path in (before, after))
        if first.size != second.size:
            raise SkipItem(f"{name}: screenshots differ in size, {first.size} and {second.size}")
        return GUITransition(first, second, dict(action), nodes, name=name, steps=self.steps)

    def describe(self, index: int) -> str:
        return f"{self.transitions[index][4]} ({self.transitions[index][0]})"


def _num_steps(row: dict, line: int, skips: RowSkips) -> int:
    """Transitions the episode claims (one per action); 0, with the row counted as skipped, if
    malformed."""
    if isinstance(row, dict) and "_error" in row:
        skips.add(line, f"malformed row: {row['_error']}")
        return 0
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("screenshots"), list)
        or not isinstance(row.get("actions"), list)
    ):
        skips.add(line, "missing field: an episode needs lists 'screenshots' and 'actions'")
        return 0
    if len(row["screenshots"]) != len(row["actions"]) + 1:
        # AndroidControl episodes end with a final screenshot after the last action
        skips.add(line, f"missing field: {len(row['actions'])} actions need {len(row['actions']) + 1} screenshots")
        return 0
    return len(row["actions"])


def _num_windows(row: dict, line: int, skips: RowSkips, steps: int) -> int:
    """Items the episode gives: one per action with ``steps`` actions from it on; 0, counted, if it
    is shorter."""
    actions = _num_steps(row, line, skips)
    if 0 < actions < steps:
        skips.add(line, f"too short: {actions} action(s), fewer than steps={steps}")
    return max(0, actions - steps + 1)


def _node(raw: dict) -> Node:
    if "bounds" in raw:
        left, top, right, bottom = (int(v) for v in raw["bounds"])
    else:
        box = raw["bbox_pixels"]
        left, top, right, bottom = (int(box[k]) for k in ("x_min", "y_min", "x_max", "y_max"))
    if right < left or bottom < top:
        raise ValueError(f"node bounds {[left, top, right, bottom]} are inverted")
    text = raw.get("text") or raw.get("content_description") or ""
    return Node((left, top, right, bottom), str(text), str(raw.get("class") or raw.get("class_name") or ""))
