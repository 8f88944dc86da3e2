"""Audio speed: play a clip at one of several speeds, or backwards, and ask which (multiple choice).

The audio counterpart of playback-speed and arrow-of-time pretext tasks (e.g. SpeedNet, CVPR 2020;
Wei et al., CVPR 2018). Every option yields a clip of the same length, so the duration gives nothing
away.
"""

from __future__ import annotations

import random

import numpy as np

from tasks import answers
from tasks.audio.common import Audio, audio_part, resample, waveform_of
from tasks.base import Example, SkipItem, Task

_MIN_SECONDS = 0.2  # shortest clip shown


def _label(speed: float) -> str:
    return "normal speed" if speed == 1 else f"{speed:g} times normal speed"


class AudioSpeed(Task):
    """Play a window of the clip at a speed drawn from ``speeds`` (or reversed) and ask which,
    lettered.

    Speed ``s`` reads ``s`` seconds of the original per second shown (pitch moves with it, as a tape
    would). Every example shows ``duration / max(speeds)`` seconds, taken from a random place in the
    clip.

    Args:
        speeds: Playback speeds offered, each > 0 and distinct (1 is the original).
        reverse: Also offer the original speed played backwards.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "audio_speed"
    modality = "audio"
    parts = ("accuracy",)
    levels = {
        "2way": {"speeds": [0.5, 2.0], "reverse": False},
        "4way": {},
        "fine": {"speeds": [0.75, 1.0, 1.25, 1.5], "reverse": False},
    }

    def __init__(self, speeds: list[float] = [0.5, 1.0, 2.0], reverse: bool = True, **kwargs):  # noqa: B006
        super().__init__(**kwargs)
        if not speeds or any(not s > 0 for s in speeds) or len(set(speeds)) != len(speeds):
            raise ValueError(f"speeds must be distinct positive numbers, got {speeds}")
        self.options = [_label(s) for s in speeds] + ["played backwards"] * reverse
        if len(self.options) < 2:
            raise ValueError("need at least two options: give two speeds, or one speed with reverse=True")
        self.speeds = [float(s) for s in speeds]
        self.reverse = reverse

    def make_example(self, item: Audio, rng: random.Random) -> Example:
        wave = waveform_of(item)
        sr = item.sampling_rate
        shown = int(len(wave) / max(self.speeds + [1.0] * self.reverse))  # samples shown, for every option
        if shown < _MIN_SECONDS * sr:
            raise SkipItem(f"{item.name or 'audio'}: {item.duration:.2f} s is too short for speeds {self.speeds}")
        choice = rng.randrange(len(self.options))
        speed = self.speeds[choice] if choice < len(self.speeds) else 1.0
        span = min(len(wave), round(shown * speed))  # original samples read
        start = rng.randint(0, len(wave) - span)
        clip = wave[start : start + span]
        played = clip[::-1] if choice == len(self.speeds) else resample(clip, speed, 1.0)
        played = _fit(played, shown)
        question = (
            f"Is this recording played at normal speed, sped up, slowed down, or backwards?\n"
            f"{answers.choice_prompt(self.options)}"
        )
        meta = {"speed": speed, "reversed": choice == len(self.speeds), "start_sample": start}
        return Example(self.user_message([audio_part(played, sr)], question), self.options[choice], self.name, meta)

    def answer_text(self, example: Example) -> str:
        return answers.letter(self.options.index(example.answer))

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        chosen = answers.parse_letter(answer, self.options, self.strict_letters)
        return None if chosen is None else {"accuracy": float(chosen == example.answer)}


def _fit(wave: np.ndarray, length: int) -> np.ndarray:
    """``wave`` cut or zero-padded at the end to exactly ``length`` samples (resampling rounds by a
    sample)."""
    return np.pad(wave[:length], (0, max(0, length - len(wave))))
