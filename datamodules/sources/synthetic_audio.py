"""`SyntheticAudio`: procedurally generated sounds (notes, chirps, noise bursts, rhythms, vowels),
so audio tasks need no data on disk. Every sound changes over time, so order, speed and direction
can be heard.
"""

from __future__ import annotations

import numpy as np

from datamodules.sources.base import Source
from tasks import Audio

KINDS = ("tones", "chirp", "noise_bursts", "rhythm", "vowel")
_FORMANTS = {  # (F1, F2, F3) in Hz of five vowels, adult speaker averages
    "a": (730, 1090, 2440),
    "e": (530, 1840, 2480),
    "i": (270, 2290, 3010),
    "o": (570, 840, 2410),
    "u": (300, 870, 2240),
}


class SyntheticAudio(Source):
    """Generated sounds; item ``i`` is a pure function of ``(seed, i)``, its kind drawn uniformly
    from ``kinds``.

    - ``tones``: 2-5 successive notes (150-1000 Hz, 1-4 harmonics), each with a sharp attack and a
      decay.
    - ``chirp``: a sine sweeping exponentially up or down between 100 and 2000 Hz, fading in and
      out.
    - ``noise_bursts``: 3-8 bursts of coloured noise at random times, each decaying within 0.05-0.3
      s.
    - ``rhythm``: a drum-like hit (a decaying 100-2000 Hz sine) every 0.15-0.5 s, every 2nd-4th one
      accented.
    - ``vowel``: a pulse train at 90-250 Hz with vibrato through the formant resonances of a vowel.

    Each is scaled to a peak of 0.4-0.9 over a faint noise floor.

    Args:
        size: Number of distinct items (the length of the source).
        seconds: Duration of every item.
        sampling_rate: Samples per second.
        kinds: Which sounds to draw from.
        seed: Selects a different family of sounds.
    """

    modality = "audio"

    def __init__(
        self,
        size: int = 1000,
        seconds: float = 2.0,
        sampling_rate: int = 16000,
        kinds: list[str] = list(KINDS),  # noqa: B006
        seed: int = 0,
    ):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if not seconds > 0 or sampling_rate < 1000:
            raise ValueError(f"need seconds > 0 and sampling_rate >= 1000, got {seconds}, {sampling_rate}")
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or not kinds:
            raise ValueError(f"kinds must be a non-empty list of {KINDS}, got unknown {unknown}")
        self.size = size
        self.seconds = seconds
        self.sampling_rate = sampling_rate
        self.kinds = list(kinds)
        self.seed = seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Audio:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for SyntheticAudio of size {self.size}")
        rng = np.random.default_rng([self.seed, index])
        kind = self.kinds[int(rng.integers(len(self.kinds)))]
        t = np.arange(int(self.seconds * self.sampling_rate)) / self.sampling_rate  # [S] seconds
        wave = getattr(self, f"_{kind}")(t, rng)
        wave = wave / max(np.abs(wave).max(), 1e-9) * rng.uniform(0.4, 0.9) + rng.normal(0, 1e-3, len(t))
        return Audio(waveform=wave.astype(np.float32), sampling_rate=self.sampling_rate, name=self.describe(index))

    def describe(self, index: int) -> str:
        return f"SyntheticAudio(seed={self.seed})[{index}]"

    def _tones(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        bounds = np.sort(rng.uniform(0, self.seconds, int(rng.integers(1, 5))))
        starts = np.concatenate([[0.0], bounds])
        note = np.searchsorted(starts, t, side="right") - 1  # [S] which note sounds
        pitch = rng.uniform(150, 1000, len(starts))[note]
        since = t - starts[note]
        envelope = np.minimum(since / 0.01, 1.0) * np.exp(-since * rng.uniform(1, 6))
        harmonics = int(rng.integers(1, 5))
        return envelope * sum(np.sin(2 * np.pi * h * pitch * since) / h for h in range(1, harmonics + 1))

    def _chirp(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        low = 100 * 2 ** rng.uniform(0, 1.5)
        high = 2000 / 2 ** rng.uniform(0, 1.5)
        f0, f1 = (low, high) if rng.random() < 0.5 else (high, low)
        rate = np.log(f1 / f0) / self.seconds
        phase = 2 * np.pi * f0 * np.expm1(rate * t) / rate  # integral of f0 * exp(rate * t)
        return np.sin(phase) * np.minimum(1.0, np.minimum(t, self.seconds - t) / 0.05)

    def _noise_bursts(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        noise = rng.normal(0, 1, len(t))
        width = int(rng.integers(1, 12))  # a moving average: wider is darker noise
        noise = np.convolve(noise, np.ones(width) / width, mode="same")
        envelope = np.zeros_like(t)
        for start in rng.uniform(0, self.seconds * 0.9, int(rng.integers(3, 9))):
            since = t - start
            envelope += np.where(since >= 0, np.exp(-np.clip(since, 0, None) / rng.uniform(0.02, 0.1)), 0.0)
        return noise * envelope

    def _rhythm(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        period = rng.uniform(0.15, 0.5)
        offset = rng.uniform(0, 0.1)
        beat = np.floor((t - offset) / period)
        since = t - offset - beat * period
        accent = np.where(beat % int(rng.integers(2, 5)) == 0, 1.0, 0.5)
        hit = np.sin(2 * np.pi * rng.uniform(100, 2000) * since) * np.exp(-since * rng.uniform(15, 40))
        return np.where(t >= offset, accent * hit, 0.0)

    def _vowel(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        sr = self.sampling_rate
        f0 = rng.uniform(90, 250) * (1 + 0.03 * np.sin(2 * np.pi * rng.uniform(4, 7) * t))  # vibrato
        cycles = np.cumsum(f0) / sr
        pulses = np.diff(np.floor(cycles), prepend=0.0)  # [S] 1 at each glottal pulse
        formants = _FORMANTS["aeiou"[int(rng.integers(5))]]
        tr = np.arange(int(0.03 * sr)) / sr  # 30 ms impulse response
        response = sum(np.exp(-np.pi * 80 * (k + 1) * tr) * np.sin(2 * np.pi * f * tr) for k, f in enumerate(formants))
        envelope = np.minimum(1.0, np.minimum(t, self.seconds - t) / 0.1)
        return np.convolve(pulses, response)[: len(t)] * envelope
