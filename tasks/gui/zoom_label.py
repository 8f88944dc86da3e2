"""GUI zoom label: read the label of one marked element on a screenshot shown too small to read,
with the crop tool (`tasks.CropZoom`) on the full-resolution screenshot: "thinking with images" on
GUIs (DeepEyes' crop tool, arXiv 2505.14362, as UI grounding agents zoom into screenshots).

Unlike `tasks.ZoomMarker`, the shrunk view hides the label only as far as its text is too small to
read there (a few pixels tall by default), not by construction.
"""

from __future__ import annotations

import random

from PIL import Image, ImageDraw

from tasks import answers
from tasks.base import Example, SkipItem
from tasks.gui.common import GUITransition
from tasks.gui.grounding import GUIGrounding
from tasks.tool_use import ToolUseTask, crop_grounding, crop_offer
from tasks.tools.base import Call, Toolbox
from tasks.tools.crop_zoom import FULL_IMAGE, SHOWN_SIZE, CropZoom, full_box

_FRAME = (255, 0, 0)


class GUIZoomLabel(ToolUseTask):
    """Frame one labelled element of a screenshot in red, show the screenshot shrunk ``zoom`` times
    and ask which of the screen's labels the framed element shows; the policy may crop and zoom
    before it answers.

    Args:
        kinds: Roles an element may have to be asked about: those whose label the screenshot
            shows (`datamodules.SyntheticGUI` draws none on tabs and panels, and a real tree's
            content descriptions are not drawn either); None allows any labelled leaf.
        zoom: How many times the screenshot is shrunk for the prompt (the frame is as thick, so it
            stays visible).
        choices: Options per question: the element's label and other labels of the same screen
            (fewer when the screen has fewer; a screen with one label is skipped).
        tools: Offer the crop tool; False asks the same examples in one turn (the control arm).
        max_turns: Turns per row with the tool, the answer's included.
        crop_pixels: Pixels of a crop as the tool returns it (`tasks.CropZoom`'s ``max_pixels``).
        grounding_weight: Weight of ``grounding``: the IoU of the first crop with the framed box.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "gui_zoom_label"
    modality = "gui"
    parts = ("accuracy", "grounding")
    levels = {"2x": {"zoom": 2}, "4x": {}}

    def __init__(
        self,
        kinds: list[str] | None = ["button", "row", "text_field", "app_bar", "icon"],  # noqa: B006  (never mutated)
        zoom: int = 4,
        choices: int = 4,
        tools: bool = True,
        max_turns: int = 2,
        crop_pixels: int = 224 * 224,
        grounding_weight: float = 0.5,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.set_toolbox(Toolbox((CropZoom(crop_pixels),), max_turns) if tools else None, grounding_weight)
        self.tools, self.max_turns, self.crop_pixels = tools, max_turns, crop_pixels
        if zoom < 1 or choices < 2:
            raise ValueError(f"need zoom >= 1 and choices >= 2, got {zoom}, {choices}")
        self.zoom, self.choices = zoom, choices
        self.kinds = kinds
        self.grounding_task = GUIGrounding(kinds, min_side=2 * zoom + 1)  # its targets

    def make_example(self, item: GUITransition, rng: random.Random) -> Example:
        full = item.before.convert("RGB")
        targets = self.grounding_task.targets(item.nodes or [], full.size)
        texts = sorted({node.text for node in targets})
        if len(texts) < 2:
            raise SkipItem(f"{item.name}: fewer than two labels on the screen to choose from")
        node = rng.choice(targets)
        others = rng.sample([t for t in texts if t != node.text], min(self.choices, len(texts)) - 1)
        options = rng.sample([node.text, *others], len(others) + 1)
        left, top, right, bottom = node.bounds
        framed = (left - self.zoom, top - self.zoom, right + self.zoom, bottom + self.zoom)
        ImageDraw.Draw(full).rectangle((*framed[:2], framed[2] - 1, framed[3] - 1), outline=_FRAME, width=self.zoom)
        shown = [max(1, round(full.width / self.zoom)), max(1, round(full.height / self.zoom))]
        view = full.resize(tuple(shown), Image.Resampling.BOX)
        meta = {SHOWN_SIZE: shown, "box": _shown(framed, shown, full.size), "options": options}
        messages = self.user_message([{"type": "image", "image": view}], self._question(shown, options))
        return Example(messages, node.text, self.name, meta, tool_media={FULL_IMAGE: full})

    def _question(self, shown: list[int], options: list[str]) -> str:
        question = (
            f"This screenshot is shown {self.zoom} times smaller than it is, at {shown[0]}x{shown[1]} pixels. "
            "Which label does the element framed in red show?\n" + answers.choice_prompt(options)
        )
        if self.toolbox is None:
            return question
        return f"{question}\n{crop_offer(self.toolbox.max_turns - 1)}"

    def answer_text(self, example: Example) -> str:
        return answers.letter(example.meta["options"].index(example.answer))

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        label = answers.parse_letter(answer, example.meta["options"], self.strict_letters)
        return None if label is None else {"accuracy": float(label == example.answer)}

    def expert_calls(self, example: Example) -> list[str]:
        return ["<crop>{}, {}, {}, {}</crop>".format(*example.meta["box"])]

    def grounding(self, example: Example, calls: list[Call]) -> float | None:
        return crop_grounding(example, calls)


def _shown(box: tuple[int, ...], shown: list[int], full: tuple[int, int]) -> list[int]:
    """A full-resolution box in the smallest whole shown pixels that cover it, clamped to the
    shown image (what the expert crops, and the grounding box)."""
    covered = full_box(box, full, tuple(shown))  # full -> shown: the same widening map, inverted
    return [min(max(v, 0), shown[i % 2]) for i, v in enumerate(covered)]
