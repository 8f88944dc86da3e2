"""`FramePairs`: consecutive frames of a recorded agent (a video's frames or a simulator log) with
the discrete action taken between them, for embodied inverse dynamics."""

from __future__ import annotations

from pathlib import Path

from datamodules.sources.base import Source
from datamodules.sources.jsonl import RowSkips, episodes, inside, load_rgb
from datamodules.sources.limits import MAX_IMAGE_PIXELS, MAX_LINE_BYTES, check_limit
from tasks import SkipItem
from tasks.gui.common import FramePair


class FramePairs(Source):
    """Every consecutive pair of frames of every episode of a JSONL file, labelled with the action
    between.

    One episode per line, ``{"frames": ["run3/000.png", "run3/001.png", "run3/002.png"], "actions":
    ["left", "up"]}``: ``actions[t]`` leads from ``frames[t]`` to ``frames[t + 1]``. Frame paths are
    relative to the folder of the file and may not lead outside it. Pairs with a label outside the
    action set, or a path that escapes the folder or names no file, are skipped when the file is
    read, counted in ``skipped`` and logged once; a frame that cannot be decoded raises
    `tasks.SkipItem`.

    Args:
        path: The JSONL file.
        actions: The agent's action set, in the order lettered options list it; ``None`` takes every
            label found in the file, sorted.
        max_image_pixels: Most pixels of a frame; a larger one skips its item, unread.
        max_line_bytes: Most bytes of one line (episode); a longer one is skipped, never held whole.
    """

    modality = "frame_pair"

    def __init__(
        self,
        path: str,
        actions: list[str] | None = None,
        max_image_pixels: int = MAX_IMAGE_PIXELS,
        max_line_bytes: int = MAX_LINE_BYTES,
    ):
        self.max_image_pixels = check_limit(max_image_pixels, "max_image_pixels")
        check_limit(max_line_bytes, "max_line_bytes")
        self.root, rows = episodes(path, "FramePairs", max_line_bytes)
        skips = RowSkips("FramePairs", path)
        found: list[tuple[str, str, str, int]] = []  # (before, after, label, line) still unresolved
        for line, row in rows:
            if isinstance(row, dict) and "_error" in row:  # not JSON, or a line over max_line_bytes
                skips.add(line, f"malformed row: {row['_error']}")
                continue
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("frames"), list)
                or not isinstance(row.get("actions"), list)
                or len(row["frames"]) != len(row["actions"]) + 1
            ):
                skips.add(line, "missing field: an episode needs 'frames' and one fewer 'actions'")
                continue
            found += [
                (row["frames"][t], row["frames"][t + 1], row["actions"][t], line) for t in range(len(row["actions"]))
            ]
        labels = sorted({label for *_, label, _ in found if isinstance(label, str)})
        self.actions = tuple(labels if actions is None else actions)
        self.pairs: list[tuple[Path, Path, str, str]] = []
        for t, (before, after, label, line) in enumerate(found):
            try:
                if not isinstance(label, str) or label not in self.actions:
                    raise ValueError(f"action {label!r} is not in the action set {list(self.actions)}"[:200])
                self.pairs.append((inside(self.root, before), inside(self.root, after), label, f"line {line} pair {t}"))
            except Exception as err:  # whatever a malformed pair raises
                skips.add(line, f"bad pair: {type(err).__name__}: {str(err)[:200]}")
        skips.report()
        self.skipped = skips.count
        if not self.pairs:
            raise ValueError(f"FramePairs: no usable frame pair in {path!r} ({self.skipped} skipped)")

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> FramePair:
        before, after, label, name = self.pairs[index]
        first, second = (load_rgb(path, self.max_image_pixels) for path in (before, after))
        if first.size != second.size:
            raise SkipItem(f"{name}: frames differ in size, {first.size} and {second.size}")
        return FramePair(first, second, label, self.actions, name=name)

    def describe(self, index: int) -> str:
        return f"{self.pairs[index][3]} ({self.pairs[index][0]})"
