"""Anomaly grounding: alter one stretch of a video and ask when it happens.

Follows VideoSSR (arXiv 2511.06281; lcqysl/VideoSSR pretext_tasks/grounding.py): 8-16 consecutive
frames get one perturbation, the answer is the stretch's start and end in seconds (``3.5-6.0``) and
the reward is the temporal IoU.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image, ImageFilter

from tasks.answers import interval_scores, interval_text, parse_interval
from tasks.base import Example, Task, Video, check_subset
from tasks.video.common import even_frames, frames_of, video_part

_MIN_FRAMES = 4  # a 2-frame stretch inside a video twice as long


def channel_swap(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Red and blue exchanged."""
    return frames[..., ::-1].copy()


def mirror(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Flipped left to right."""
    return frames[:, :, ::-1].copy()


def rotate180(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Turned upside down (a half turn)."""
    return frames[:, ::-1, ::-1].copy()


def rotate90(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """A quarter turn clockwise, shrunk to fit the frame (aspect ratio kept) and centred on
    black."""
    return _fit_on_black(np.rot90(frames, k=-1, axes=(1, 2)), *frames.shape[1:3])


def rotate270(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Three quarter turns clockwise (a quarter turn counter-clockwise), fitted like `rotate90`."""
    return _fit_on_black(np.rot90(frames, k=1, axes=(1, 2)), *frames.shape[1:3])


def _luma(frames: np.ndarray) -> np.ndarray:
    """Luma ``[T, H, W]`` uint8 of RGB frames (ITU-R BT.601 weights, as PIL's ``L`` mode)."""
    return np.rint(frames.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)).astype(np.uint8)


def grayscale(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Luma (ITU-R BT.601 weights) in all three channels."""
    return np.repeat(_luma(frames)[..., None], 3, axis=-1)


def saturation(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Colour saturation doubled: each pixel moved twice as far from its grey (PIL
    ``ImageEnhance.Color(2)``)."""
    gray = _luma(frames)[..., None].astype(np.int16)
    return np.clip(gray + 2 * (frames.astype(np.int16) - gray), 0, 255).astype(np.uint8)


def invert(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Photographic negative."""
    return 255 - frames


def zoom_in(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """The central part, 1/1.3 to 1/1.5 of each side, enlarged to the full frame."""
    scale = rng.uniform(1.3, 1.5)
    height, width = frames.shape[1:3]
    crop_h = max(1, round(height / scale))
    crop_w = max(1, round(width / scale))
    top = (height - crop_h) // 2
    left = (width - crop_w) // 2
    return np.stack([_resize(frame[top : top + crop_h, left : left + crop_w], width, height) for frame in frames])


def zoom_out(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """The whole frame shrunk by 1.2 to 1.4 and centred on black."""
    scale = rng.uniform(1.2, 1.4)
    height, width = frames.shape[1:3]
    small_h = max(1, round(height / scale))
    small_w = max(1, round(width / scale))
    return _centre_on_black([_resize(frame, small_w, small_h) for frame in frames], height, width)


def blur(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Gaussian blur of radius 2 pixels."""
    return np.stack([np.asarray(Image.fromarray(f).filter(ImageFilter.GaussianBlur(2))) for f in frames])


def noise(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Gaussian noise of a standard deviation drawn from [35, 70] grey levels."""
    sigma = rng.uniform(35, 70)
    generator = np.random.default_rng(rng.getrandbits(64))
    return np.clip(np.rint(frames + generator.normal(0.0, sigma, frames.shape)), 0, 255).astype(np.uint8)


def shuffle(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Frames reordered so that none stays in place (a random cycle, Sattolo's algorithm)."""
    order = list(range(len(frames)))
    for i in range(len(order) - 1, 0, -1):
        j = rng.randrange(i)
        order[i], order[j] = order[j], order[i]
    return frames[order]


def stutter(frames: np.ndarray, rng: random.Random) -> np.ndarray:
    """Every 2nd to 5th frame held in place of the ones after it: the motion freezes and jumps."""
    hold = rng.randint(2, 5)
    return frames[[i - i % hold for i in range(len(frames))]]


def _resize(frame: np.ndarray, width: int, height: int) -> np.ndarray:
    if frame.shape[:2] == (height, width):
        return np.ascontiguousarray(frame)
    return np.asarray(Image.fromarray(np.ascontiguousarray(frame)).resize((width, height), Image.Resampling.BILINEAR))


def _centre_on_black(frames: Sequence[np.ndarray], height: int, width: int) -> np.ndarray:
    """Frames ``[T, h, w, 3]`` no larger than ``height x width``, centred on black frames of that
    size."""
    small_h, small_w = frames[0].shape[:2]
    top = (height - small_h) // 2
    left = (width - small_w) // 2
    out = np.zeros((len(frames), height, width, 3), np.uint8)
    for i, frame in enumerate(frames):
        out[i, top : top + small_h, left : left + small_w] = frame
    return out


def _fit_on_black(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """Frames of any size shrunk (aspect ratio kept) to fit ``height x width`` and centred on black:
    a turned frame keeps the video's frame size (VideoSSR lets it change, which one ``[T, H, W, 3]``
    clip cannot)."""
    scale = min(height / frames.shape[1], width / frames.shape[2], 1.0)
    small_h = max(1, round(frames.shape[1] * scale))
    small_w = max(1, round(frames.shape[2] * scale))
    return _centre_on_black([_resize(frame, small_w, small_h) for frame in frames], height, width)


PERTURBATIONS: dict[str, Callable[[np.ndarray, random.Random], np.ndarray]] = {
    f.__name__: f
    for f in (
        channel_swap,
        mirror,
        zoom_out,
        rotate180,
        grayscale,
        invert,
        zoom_in,
        blur,
        noise,
        shuffle,
        stutter,
        rotate90,
        rotate270,
        saturation,
    )
}
#: The perturbation that needs a second video: the stretch is replaced by the same frames of another
#: video.
SWAP = "swap"
_DESCRIPTIONS = {
    "channel_swap": "the red and blue colours are exchanged",
    "mirror": "the picture is flipped left to right, as in a mirror",
    "zoom_out": "the picture shrinks and a black border appears around it",
    "rotate180": "the picture is turned upside down",
    "grayscale": "the colours vanish and the picture turns black and white",
    "invert": "the colours are inverted, like a photographic negative",
    "zoom_in": "the view suddenly zooms in on the middle of the picture",
    "blur": "the picture goes blurry",
    "noise": "heavy grainy noise covers the picture",
    "shuffle": "the frames play in a scrambled order",
    "stutter": "the motion stutters: the picture freezes for a moment, then jumps ahead",
    "rotate90": "the picture is turned a quarter turn clockwise",
    "rotate270": "the picture is turned a quarter turn counter-clockwise",
    "saturation": "the colours become oversaturated and unnaturally vivid",
    SWAP: "the video cuts to a clip from a different video",
}


class AnomalyGrounding(Task):
    """Alter one stretch of consecutive frames and ask for its start and end time in seconds.

    Args:
        perturbations: What the stretch may undergo, drawn uniformly: ``channel_swap``, ``mirror``,
            ``zoom_out`` and ``rotate180`` (the four VideoSSR trains on), ``grayscale``, ``invert``,
            ``zoom_in``, ``blur``, ``noise``, ``shuffle`` (frame order inside the stretch),
            ``stutter`` (frames held), ``rotate90`` / ``rotate270`` (quarter turns clockwise /
            counter-clockwise, shrunk onto black to keep the frame size), ``saturation`` (doubled)
            and ``swap``: the same frames of another video of the split, resized to this one's frame
            size. With ``swap`` each example loads one more video (`partners` is 1), or, given a
            single video, takes the frames half the video away.
        min_len: Fewest frames in the stretch, at least 2.
        max_len: Most frames in the stretch. Both bounds shrink to half the video when it is shorter
            than twice this.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "anomaly_grounding"
    modality = "video"
    parts = ("accuracy",)
    levels = {"4types": {}, "11types": {"perturbations": list(PERTURBATIONS)}}

    def __init__(
        self,
        perturbations: list[str] = ["channel_swap", "mirror", "zoom_out", "rotate180"],  # noqa: B006
        min_len: int = 8,
        max_len: int = 16,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_subset("perturbations", perturbations, [*PERTURBATIONS, SWAP])
        if not 2 <= min_len <= max_len:
            raise ValueError(f"need 2 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        self.perturbations = list(perturbations)
        self.min_len = min_len
        self.max_len = max_len
        self.partners = int(SWAP in self.perturbations)  # the data module then passes [video, other video]

    def make_example(self, item: Video | Sequence[Video], rng: random.Random) -> Example:
        other = None
        if not isinstance(item, Video):  # [video, other video] from the data module (swap)
            item, other = item[0], (item[1] if len(item) > 1 else None)
        frames = even_frames(item, _MIN_FRAMES)
        start, stop = self._stretch(len(frames), rng)
        kind = rng.choice(self.perturbations)
        altered = frames.copy()
        if kind == SWAP:
            altered[start:stop] = _swapped(frames, other, start, stop)
        else:
            altered[start:stop] = PERTURBATIONS[kind](frames[start:stop], rng)
        # graded against the interval as rendered (0.1 s), so the rendered answer is exactly right
        answer = [round(start / item.fps, 1), round(stop / item.fps, 1)]
        meta = {"perturbation": kind, "start_frame": start, "stop_frame": stop, "fps": float(item.fps)}
        question = (
            f"This video lasts {len(frames) / item.fps:.1f} seconds. During one stretch of it, {_DESCRIPTIONS[kind]}. "
            "When does that stretch start and end? Give both times in seconds as start-end, for example 3.5-6.0."
        )
        return Example(self.user_message([video_part(altered, item.fps)], question), answer, self.name, meta)

    def _stretch(self, total: int, rng: random.Random) -> tuple[int, int]:
        """First and one-past-last frame of the stretch; at most half the video so it is told from
        the rest."""
        longest = min(self.max_len, total // 2)
        length = rng.randint(min(self.min_len, longest), longest)
        start = rng.randint(0, total - length)
        return start, start + length

    def answer_text(self, example: Example) -> str:
        return interval_text(example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        return interval_scores(answer, example.answer)

    def parse_answer(self, example: Example, answer: str) -> tuple[float, float] | None:
        """The interval in seconds (``1.5-3`` and ``1.50 - 3.0`` are one interval)."""
        return parse_interval(answer)


def _swapped(frames: np.ndarray, other: Video | None, start: int, stop: int) -> np.ndarray:
    """Frames ``start:stop`` of the other video (VideoSSR's swap: the same frame positions, wrapping
    round a shorter video) at this video's frame size; without one, this video's frames half its
    length away."""
    if other is None:
        return frames[(np.arange(start, stop) + len(frames) // 2) % len(frames)]
    source = frames_of(other)
    height, width = frames.shape[1:3]
    return np.stack([_resize(source[t % len(source)], width, height) for t in range(start, stop)])
