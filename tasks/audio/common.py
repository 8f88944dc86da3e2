"""Waveform handling shared by the audio tasks, sources and policies: the `Audio` item, a
band-limited resampler, segments and audio content parts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tasks.base import SkipItem

_ZERO_CROSSINGS = 16  # sinc lobes on each side of a tap: the filter's length, and its sharpness
_ROLLOFF = 0.94  # pass band as a fraction of the lower Nyquist frequency; the rest is the transition band
_KAISER_BETA = 8.6  # about 80 dB stop-band attenuation
_CHUNK = 16384  # output samples filtered at once (bounds memory on long files)


@dataclass
class Audio:
    """A decoded audio item: what audio sources yield and audio tasks consume.

    Attributes:
        waveform: Mono samples ``[S]`` float32, nominally in [-1, 1].
        sampling_rate: Samples per second of ``waveform``.
        name: Where it came from (a path, or a synthetic id), for logs.
    """

    waveform: np.ndarray
    sampling_rate: int
    name: str = ""

    @property
    def duration(self) -> float:
        """Seconds of audio."""
        return len(self.waveform) / self.sampling_rate


@dataclass
class AudioQA:
    """A labelled audio multiple-choice question (the R1-AQA / MMAU layout): what `AudioMCQ`
    consumes.

    Attributes:
        audio: The recording the question is about.
        question: The question text.
        choices: The options, as text.
        answer: The correct option, one of ``choices``.
    """

    audio: Audio
    question: str
    choices: list[str]
    answer: str


def waveform_of(item: Audio, min_seconds: float = 0.0) -> np.ndarray:
    """The item's samples ``[S]`` float32; SkipItem unless mono, finite, at a positive rate and at
    least ``min_seconds`` long."""
    wave = np.asarray(item.waveform)
    name = item.name or "audio"
    if wave.ndim != 1 or not item.sampling_rate > 0 or not np.isfinite(wave).all():
        raise SkipItem(
            f"{name}: need a finite mono waveform [S] and sampling_rate > 0, got {wave.shape} at "
            f"{item.sampling_rate} Hz"
        )
    if len(wave) < min_seconds * item.sampling_rate:
        raise SkipItem(f"{name}: {len(wave) / item.sampling_rate:.2f} s, the task needs {min_seconds:g} s")
    return wave.astype(np.float32, copy=False)


def audio_part(wave: np.ndarray, sampling_rate: int) -> dict:
    """A ``{"type": "audio"}`` content part holding a float32 copy of ``wave`` (never a view of the
    item)."""
    return {"type": "audio", "audio": np.array(wave, dtype=np.float32), "sampling_rate": int(sampling_rate)}


def segments(wave: np.ndarray, k: int) -> list[np.ndarray]:
    """``k`` equal consecutive pieces of ``wave``; samples left over after an equal split are
    dropped at the end."""
    size = len(wave) // k
    return [wave[i * size : (i + 1) * size] for i in range(k)]


def resample(wave: np.ndarray, orig_rate: float, target_rate: float) -> np.ndarray:
    """``wave`` ``[S]`` (or ``[S, C]``) resampled from ``orig_rate`` to ``target_rate`` Hz,
    band-limited.

    A Kaiser-windowed sinc low-pass (cut off at 0.94 of the lower of the two Nyquist frequencies,
    about 80 dB stop band) evaluated polyphase: output sample ``n`` lies at input position ``n *
    orig / target``, and the rate ratio is made rational (denominator <= 1000) so the filter phases
    repeat and are computed once. The signal is taken as zero outside its ends. Output length is
    ``ceil(S * target / orig)``.
    """
    if not (orig_rate > 0 and target_rate > 0):
        raise ValueError(f"sampling rates must be positive, got {orig_rate} -> {target_rate}")
    wave = np.asarray(wave, dtype=np.float32)
    if orig_rate == target_rate or len(wave) == 0:
        return wave.copy()
    ratio = Fraction(target_rate / orig_rate).limit_denominator(1000)  # up / down
    up = ratio.numerator
    down = ratio.denominator
    cutoff = _ROLLOFF * min(1.0, up / down)  # in cycles per input sample x 2 (1 = input Nyquist)
    half = math.ceil(_ZERO_CROSSINGS / cutoff)  # taps each side, in input samples
    taps = np.arange(-half + 1, half + 1)  # [W] offsets from the floor of the position
    length = math.ceil(len(wave) * up / down)
    # phase p: the output sits p / up of an input sample after its floor
    distance = np.arange(up)[:, None] / up - taps[None, :]  # [up, W]
    window = np.i0(_KAISER_BETA * np.sqrt(np.clip(1 - (distance / (half + 1)) ** 2, 0, None))) / np.i0(_KAISER_BETA)
    table = (cutoff * np.sinc(cutoff * distance) * window).astype(np.float32)  # [up, W]
    padded = np.concatenate(
        [np.zeros((half,) + wave.shape[1:], np.float32), wave, np.zeros((half + 1,) + wave.shape[1:], np.float32)]
    )
    out = np.empty((length,) + wave.shape[1:], np.float32)
    for start in range(0, length, _CHUNK):
        n = np.arange(start, min(start + _CHUNK, length))
        base, phase = np.divmod(n * down, up)
        gathered = padded[base[:, None] + taps[None, :] + half]  # [n, W] (+ [C])
        out[start : start + len(n)] = np.einsum("nw...,nw->n...", gathered, table[phase])
    return out
