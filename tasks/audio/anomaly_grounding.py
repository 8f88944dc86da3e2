"""Audio anomaly grounding: alter one stretch of a clip and ask when it happens.

VideoSSR's anomaly grounding (arXiv 2511.06281) carried over to audio: one stretch is reversed,
pitch-shifted, covered by a noise burst, silenced or made much louder or quieter; the answer is its
start and end in seconds (``1.5-2.3``) and the reward is the temporal IoU.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from tasks.answers import interval_scores, interval_text, parse_interval
from tasks.audio.common import Audio, audio_part, resample, waveform_of
from tasks.base import Example, Task, check_subset

_STEP = 0.1  # seconds: stretches start and end on this grid, so the rendered answer is exact


def reverse(wave: np.ndarray, start: int, stop: int, rng: random.Random) -> np.ndarray:
    """The stretch played backwards."""
    return wave[start:stop][::-1].copy()


def pitch_shift(wave: np.ndarray, start: int, stop: int, rng: random.Random) -> np.ndarray:
    """The audio from ``start`` played 1.3-1.5 times faster or slower (pitch up or down by 4.5-7
    semitones), filling the stretch; a faster stretch reads past its end, backwards from the clip's
    end if needed."""
    rate = rng.uniform(1.3, 1.5) ** rng.choice((-1, 1))
    length = stop - start
    need = min(len(wave), int(np.ceil(length * rate)) + 1)
    first = min(start, len(wave) - need)
    return resample(wave[first : first + need], rate, 1.0)[:length]


def noise_burst(wave: np.ndarray, start: int, stop: int, rng: random.Random) -> np.ndarray:
    """White noise added, 1-2 times as loud (RMS) as the whole clip or -26 dBFS, whichever is
    louder."""
    level = max(float(np.sqrt(np.mean(wave**2))), 0.05) * rng.uniform(1.0, 2.0)
    noise = np.random.default_rng(rng.getrandbits(64)).normal(0.0, level, stop - start)
    return np.clip(wave[start:stop] + noise, -1.0, 1.0).astype(np.float32)


def silence(wave: np.ndarray, start: int, stop: int, rng: random.Random) -> np.ndarray:
    """The stretch muted."""
    return np.zeros(stop - start, np.float32)


def gain_jump(wave: np.ndarray, start: int, stop: int, rng: random.Random) -> np.ndarray:
    """The stretch 14-20 dB louder (clipped at full scale) or quieter."""
    gain = 10 ** (rng.uniform(14, 20) * rng.choice((-1, 1)) / 20)
    return np.clip(wave[start:stop] * gain, -1.0, 1.0).astype(np.float32)


PERTURBATIONS: dict[str, Callable[[np.ndarray, int, int, random.Random], np.ndarray]] = {
    f.__name__: f for f in (reverse, pitch_shift, noise_burst, silence, gain_jump)
}
_DESCRIPTIONS = {
    "reverse": "the sound plays backwards",
    "pitch_shift": "the sound plays faster or slower, so its pitch jumps up or down",
    "noise_burst": "a burst of hissing noise covers the sound",
    "silence": "the sound drops out completely",
    "gain_jump": "the sound suddenly becomes much louder or much quieter",
}


class AudioAnomalyGrounding(Task):
    """Alter one stretch of a clip and ask for its start and end time in seconds.

    Args:
        perturbations: What the stretch may undergo, drawn uniformly: ``reverse``, ``pitch_shift``,
            ``noise_burst``, ``silence``, ``gain_jump``.
        min_seconds: Shortest stretch, a multiple of 0.1 s.
        max_seconds: Longest stretch. Both bounds shrink to half the clip when it is shorter than
            twice this.
        **kwargs: Answer format options, see `tasks.Task`.
    """

    name = "audio_anomaly_grounding"
    modality = "audio"
    parts = ("accuracy",)
    levels = {"long": {"min_seconds": 0.5, "max_seconds": 1.0}, "short": {"min_seconds": 0.1, "max_seconds": 0.3}}

    def __init__(
        self,
        perturbations: list[str] = ["reverse", "pitch_shift", "noise_burst", "silence", "gain_jump"],  # noqa: B006
        min_seconds: float = 0.3,
        max_seconds: float = 1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_subset("perturbations", perturbations, PERTURBATIONS)
        if not _STEP <= min_seconds <= max_seconds:
            raise ValueError(f"need {_STEP} <= min_seconds <= max_seconds, got {min_seconds}, {max_seconds}")
        self.perturbations = list(perturbations)
        self.min_seconds, self.max_seconds = min_seconds, max_seconds  # kept, so a curriculum can copy the task
        self.min_steps = round(min_seconds / _STEP)
        self.max_steps = round(max_seconds / _STEP)

    def make_example(self, item: Audio, rng: random.Random) -> Example:
        wave = waveform_of(item, 4 * _STEP)  # a stretch of one step inside a clip at least twice as long
        sr = item.sampling_rate
        total = int(len(wave) / sr / _STEP + 1e-9)  # whole steps in the clip
        longest = min(self.max_steps, total // 2)
        length = rng.randint(min(self.min_steps, longest), longest)
        first = rng.randint(0, total - length)
        start = round(first * _STEP * sr)
        stop = round((first + length) * _STEP * sr)
        kind = rng.choice(self.perturbations)
        altered = wave.copy()
        altered[start:stop] = PERTURBATIONS[kind](wave, start, stop, rng)
        answer = [round(first * _STEP, 1), round((first + length) * _STEP, 1)]
        question = (
            f"This recording lasts {len(wave) / sr:.1f} seconds. During one stretch of it, {_DESCRIPTIONS[kind]}. "
            "When does that stretch start and end? Give both times in seconds as start-end, for example 1.5-2.3."
        )
        meta = {"perturbation": kind, "start_sample": start, "stop_sample": stop, "sampling_rate": int(sr)}
        return Example(self.user_message([audio_part(altered, sr)], question), answer, self.name, meta)

    def answer_text(self, example: Example) -> str:
        return interval_text(example.answer)

    def score(self, example: Example, answer: str) -> dict[str, float] | None:
        return interval_scores(answer, example.answer)

    def parse_answer(self, example: Example, answer: str) -> tuple[float, float] | None:
        """The interval in seconds (``1.5-3`` and ``1.50 - 3.0`` are one interval)."""
        return parse_interval(answer)
