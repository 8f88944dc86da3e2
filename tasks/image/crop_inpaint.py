"""Cropped patch inpainting (Spatial-SSRL, arXiv 2510.27606; InternLM/Spatial-SSRL
data_process/Crop.py).

A square of side ``min(H, W) / 2`` is blacked out; the policy picks the missing square among four
options: the true crop and three distractors drawn from the crop turned a quarter left or right, its
centre half enlarged, and the crop with a quarter or half side of context around it, all resized to
the square (A-D).
"""

from __future__ import annotations

import random

from PIL import Image

from tasks import answers
from tasks.base import Example, SkipItem, Task

DISTRACTORS = ("rotate_left", "rotate_right", "interior", "context_quarter", "context_half")


def _context(image: Image.Image, box: tuple[int, int, int, int], margin: int) -> Image.Image:
    """The crop ``box`` grown by ``margin`` on each side (shifted to stay inside the image)."""
    left, top, right, _ = box
    side = right - left + 2 * margin
    x = min(max(left - margin, 0), image.width - side)
    y = min(max(top - margin, 0), image.height - side)
    return image.crop((x, y, x + side, y + side))


def distractor(kind: str, image: Image.Image, box: tuple[int, int, int, int]) -> Image.Image:
    """A wrong option of ``kind`` for the crop ``box`` of ``image``, as large as the crop."""
    crop = image.crop(box)
    side = box[2] - box[0]
    if kind == "rotate_left":
        return crop.transpose(Image.Transpose.ROTATE_90)
    if kind == "rotate_right":
        return crop.transpose(Image.Transpose.ROTATE_270)
    if kind == "interior":
        inner = crop.crop((side // 4, side // 4, side - side // 4, side - side // 4))
        return inner.resize((side, side), Image.Resampling.BICUBIC)
    margin = side // 4 if kind == "context_quarter" else side // 2
    return _context(image, box, margin).resize((side, side), Image.Resampling.BICUBIC)


class CropInpaint(Task):
    """Black out a random square and ask which of four squares fills the hole.

    Args:
        distractors: Kinds of wrong option to draw three from: ``rotate_left``, ``rotate_right``
            (the crop turned 90 degrees), ``interior`` (its centre half enlarged),
            ``context_quarter`` and ``context_half`` (the crop with that much surrounding context,
            shrunk). Spatial-SSRL uses all five.
        min_size: Images whose square (half the shorter side) would be below this many pixels are
            skipped.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "crop_inpaint"
    modality = "image"
    parts = ("accuracy",)
    levels = {
        "rotated": {"distractors": ["rotate_left", "rotate_right", "interior"]},
        "context": {"distractors": ["interior", "context_quarter", "context_half"]},
    }

    def __init__(self, distractors: list[str] = list(DISTRACTORS), min_size: int = 16, **kwargs):  # noqa: B006
        super().__init__(**kwargs)
        unknown = set(distractors) - set(DISTRACTORS)
        if unknown or len(set(distractors)) < 3:
            raise ValueError(f"distractors must name at least 3 distinct kinds of {DISTRACTORS}, got {distractors}")
        self.distractors = list(distractors)
        self.min_size = min_size

    def make_example(self, item: Image.Image, rng: random.Random) -> Example:
        image = item.convert("RGB")
        side = min(image.size) // 2
        if side < self.min_size:
            raise SkipItem(f"{image.size} image: a {side} px square is below min_size={self.min_size}")
        x = rng.randrange(image.width - side + 1)
        y = rng.randrange(image.height - side + 1)
        box = (x, y, x + side, y + side)
        kinds = ["original", *rng.sample(self.distractors, 3)]
        rng.shuffle(kinds)
        options = [image.crop(box) if k == "original" else distractor(k, image, box) for k in kinds]
        if len({option.tobytes() for option in options}) < 4:
            raise SkipItem(f"crop {box} looks the same as one of its distractors {kinds}")
        holed = image.copy()
        holed.paste((0, 0, 0), box)
        media = [{"type": "text", "text": "Image with a missing part:"}, {"type": "image", "image": holed}]
        for i, option in enumerate(options):
            media += [{"type": "text", "text": f"Option {answers.letter(i)}:"}, {"type": "image", "image": option}]
        question = (
            "Which option is the missing part of the first image? Based on visual clues such as alignment, image "
            "content and positional relationship, answer with the letter A, B, C or D."
        )
        meta = {"box": list(box), "kinds": kinds}
        return Example(self.user_message(media, question), answers.letter(kinds.index("original")), self.name, meta)

    def answer_text(self, example: Example) -> str:
        return example.answer

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        kind = answers.parse_letter(answer, example.meta["kinds"], self.strict_letters)
        return None if kind is None else {"accuracy": float(kind == "original")}
