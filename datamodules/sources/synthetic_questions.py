"""`SyntheticQuestions`: labelled multiple-choice questions about synthetic images, clips and
ray-cast rooms with known layouts (spatial relations, counting, relative depth, temporal order), in
a training split for supervised corpora and a test split held out from every training stream, for
downstream checks that are no pretext task."""

from __future__ import annotations

import numpy as np
from PIL import Image

from datamodules.sources.base import Source
from datamodules.sources.shapes import COLOURS, KINDS, pixel_centres, shape_mask
from datamodules.sources.synthetic_rgbd import SyntheticRGBD
from tasks import Question, Video

QUESTION_KINDS = ("spatial", "counting", "depth", "temporal")
SPLITS = {"train": 0, "test": 1}
#: First words of every random stream drawn here, so no item repeats one of another source's (those
#: seed with ``[seed, index]``): the two splits and the four kinds draw from disjoint streams too.
_SALT = 20260620
#: Rooms are drawn by `SyntheticRGBD` with seed ``_ROOM_SEEDS + split * 10**6 + seed``, far from any
#: seed a training source is given (a test checks the first rooms of seeds 0-9 against them).
_ROOM_SEEDS = 10**9
_ROOM_TRIES = 32  # rooms tried per depth question until one shows two objects side by side at clearly different depths
RELATIONS = ("left", "right", "above", "below")


class SyntheticQuestions(Source):
    """Multiple-choice questions (`tasks.Question`) about synthetic media whose layout is known, so
    each answer is exact; item ``i`` is a pure function of ``(split, seed, i)``. Read them with
    `tasks.MultipleChoice` (``shuffle_choices: false`` keeps the option order below).

    Item ``i`` asks a question of kind ``kinds[i % len(kinds)]``:

    - ``spatial``: a red and a blue shape (circle or square) on a dark background, clearly apart
      along one axis; "Where is the red shape relative to the blue shape?" (left / right / above /
      below).
    - ``counting``: 1-4 non-overlapping shapes of the palette's colours; "How many shapes?" (1 / 2 /
      3 / 4).
    - ``depth``: a `SyntheticRGBD` room (colour only) with two objects side by side, 0.75 m or more
      apart in depth; "Is the object on the left nearer or farther than the one on the right?"
      (nearer / farther).
    - ``temporal``: a clip of ``num_frames`` frames in which a red and a blue shape appear at
      different frames and stay; "Did the red shape appear earlier or later than the blue shape?"
      (earlier / later).

    Args:
        kinds: Question kinds, taken in turn.
        split: ``train`` (corpora for supervised training) or ``test`` (held-out benchmarks):
            disjoint streams.
        size: Number of questions (the length of the source).
        image_size: Side of the square images and clip frames; rooms are rendered at this size too.
        num_frames: Frames per temporal clip (even, >= 4).
        seed: Selects a different family of questions within the split (0 to 999999).
    """

    modality = "mcq"

    def __init__(
        self,
        kinds: list[str] | None = None,
        split: str = "test",
        size: int = 256,
        image_size: int = 56,
        num_frames: int = 4,
        seed: int = 0,
    ):
        self.kinds = list(QUESTION_KINDS if kinds is None else kinds)
        if not self.kinds or set(self.kinds) - set(QUESTION_KINDS):
            raise ValueError(f"kinds must be a non-empty list of {QUESTION_KINDS}, got {self.kinds}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
        checks = {"size": (size, 1), "image_size": (image_size, 28), "num_frames": (num_frames, 4)}
        for name, (value, least) in checks.items():
            if value < least:
                raise ValueError(f"{name} must be >= {least}, got {value}")
        if num_frames % 2 or not 0 <= seed < 10**6:
            raise ValueError(f"num_frames must be even and seed in [0, 999999], got {num_frames}, {seed}")
        self.split = split
        self.size = size
        self.image_size = image_size
        self.num_frames = num_frames
        self.seed = seed
        self.rooms = SyntheticRGBD(
            size=10**8,
            width=image_size,
            height=image_size,
            objects=(2, 2),
            seed=_ROOM_SEEDS + SPLITS[split] * 10**6 + seed,
        )

    def __len__(self) -> int:
        return self.size

    def describe(self, index: int) -> str:
        return f"SyntheticQuestions({self.split}, seed={self.seed})[{index}]"

    def kind(self, index: int) -> str:
        """The kind of question ``index`` asks."""
        return self.kinds[index % len(self.kinds)]

    def __getitem__(self, index: int) -> Question:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticQuestions of size {self.size}")
        kind = self.kind(index)
        rng = np.random.default_rng([_SALT, SPLITS[self.split], QUESTION_KINDS.index(kind), self.seed, index])
        question = getattr(self, f"_{kind}")(rng, index)
        question.name = self.describe(index)
        return question

    # ---- the four kinds -------------------------------------------------------------------------
    def _spatial(self, rng: np.random.Generator, index: int) -> Question:
        side = self.image_size
        relation = RELATIONS[int(rng.integers(4))]
        radius = rng.uniform(0.13, 0.17) * side
        low = radius + 1
        high = side - radius - 1
        gap = rng.uniform(0.4, 0.6) * side  # centre distance along the relation's axis
        middle = rng.uniform(low + gap / 2, high - gap / 2)
        across = rng.uniform(low + 0.1 * side, high - 0.1 * side)
        sign = -1 if relation in ("left", "above") else 1  # the red shape is on the smaller coordinate
        along = (middle + sign * gap / 2, middle - sign * gap / 2)  # red, blue
        jitter = rng.uniform(-0.1, 0.1, 2) * side
        horizontal = relation in ("left", "right")
        centres = [(a, across + j) if horizontal else (across + j, a) for a, j in zip(along, jitter, strict=True)]
        shapes = [
            (KINDS[int(rng.integers(2))], c, radius, COLOURS[name])
            for c, name in zip(centres, ("red", "blue"), strict=True)
        ]
        image = _draw(rng, side, shapes)
        return Question(
            "Where is the red shape relative to the blue shape?", list(RELATIONS), relation, [Image.fromarray(image)]
        )

    def _counting(self, rng: np.random.Generator, index: int) -> Question:
        side = self.image_size
        count = int(rng.integers(1, 5))
        palette = list(COLOURS.values())
        shapes = _scatter(rng, side, [palette[int(k)] for k in rng.integers(len(palette), size=count)])
        image = _draw(rng, side, shapes)
        return Question(
            "How many shapes are in the picture?", ["1", "2", "3", "4"], str(count), [Image.fromarray(image)]
        )

    def _depth(self, rng: np.random.Generator, index: int) -> Question:
        for attempt in range(_ROOM_TRIES):
            room = index * _ROOM_TRIES + attempt
            pair = self._side_by_side(self.rooms.scene(room)["objects"])
            if pair is not None:
                rgb, _ = self.rooms.render(room)
                left, right = pair
                answer = "nearer" if left["centre"][2] < right["centre"][2] else "farther"
                return Question(
                    "Is the object on the left nearer to the camera than the object on the right, or farther?",
                    ["nearer", "farther"],
                    answer,
                    [Image.fromarray(rgb)],
                )
        raise RuntimeError(f"no usable room among {_ROOM_TRIES} for depth question {index}")  # never seen

    def _side_by_side(self, objects: list[dict]) -> tuple[dict, dict] | None:
        """The two objects ordered left to right when they are apart on screen (a quarter of the
        width) and in depth (0.75 m); None otherwise."""
        if len(objects) != 2:
            return None
        focal = self.rooms.intrinsics[0, 0]
        columns = [focal * o["centre"][0] / o["centre"][2] for o in objects]  # offsets from the image centre
        left, right = sorted(range(2), key=lambda k: columns[k])
        apart = columns[right] - columns[left] > 0.25 * self.image_size
        deep = abs(objects[0]["centre"][2] - objects[1]["centre"][2]) >= 0.75
        return (objects[left], objects[right]) if apart and deep else None

    def _temporal(self, rng: np.random.Generator, index: int) -> Question:
        side = self.image_size
        frames = self.num_frames
        onsets = rng.choice(frames, size=2, replace=False)  # red, blue: the frames they first show in
        shapes = _scatter(rng, side, [COLOURS["red"], COLOURS["blue"]])
        background = _background(rng, side)
        clip = np.stack(
            [
                _draw(rng, side, [s for s, start in zip(shapes, onsets, strict=True) if t >= start], background)
                for t in range(frames)
            ]
        )  # [T, H, W, 3]
        answer = "earlier" if onsets[0] < onsets[1] else "later"
        return Question(
            "Did the red shape appear earlier or later than the blue shape?",
            ["earlier", "later"],
            answer,
            [Video(clip, fps=2.0)],
        )


def _background(rng: np.random.Generator, side: int) -> np.ndarray:
    """A dark, slightly tinted background ``[side, side, 3]`` in [0, 1]."""
    return np.broadcast_to(rng.uniform(0.05, 0.3, 3), (side, side, 3)).copy()


def _draw(
    rng: np.random.Generator,
    side: int,
    shapes: list[tuple],
    background: np.ndarray | None = None,
) -> np.ndarray:
    """``shapes`` ``(kind, (cx, cy), radius, colour)`` painted in order over ``background`` (a new
    one when None), with pixel noise (sigma 0.02); uint8 ``[side, side, 3]``."""
    image = _background(rng, side) if background is None else background.copy()
    y, x = pixel_centres(side, side)
    for kind, (cx, cy), radius, colour in shapes:
        image[shape_mask(kind, x, y, cx, cy, radius)] = colour
    image = image + rng.normal(0.0, 0.02, image.shape)
    return (np.clip(image, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)


def _scatter(rng: np.random.Generator, side: int, colours: list) -> list[tuple]:
    """One shape of each of ``colours`` at random spots, apart from each other by 2 px or more
    (placement is retried; the radius shrinks when a layout will not fit)."""
    count = len(colours)
    radius = rng.uniform(0.11, 0.14) * side
    while True:
        shapes: list[tuple] = []
        for _ in range(100 * count):
            centre = rng.uniform(radius + 1, side - radius - 1, 2)
            if all(np.hypot(*(centre - c)) > 2 * radius * 1.42 + 2 for _, c, _, _ in shapes):  # squares' corners
                shapes.append((KINDS[int(rng.integers(2))], tuple(centre), radius, colours[len(shapes)]))
                if len(shapes) == count:
                    return shapes
        radius *= 0.9
