"""`AudioFolder`: every audio file under a directory tree, decoded with soundfile to mono at one
sampling rate.

`decode` is the one decoding path, shared with `AudioQAJsonl`; resampling is
`tasks.audio.common.resample` (band-limited, numpy only: no torchaudio).
"""

from __future__ import annotations

import io

import numpy as np

from datamodules.sources.base import Source, find_files
from tasks import Audio, SkipItem
from tasks.audio.common import resample
from tasks.extras import require


class AudioFolder(Source):
    """Audio files found recursively under ``root``, sorted by path so an index names the same file
    on every run.

    Item ``i`` is a `tasks.Audio` of file ``i``: channels averaged to mono, resampled to
    ``sampling_rate``, and, when the file is longer than ``clip_seconds``, cut to its central
    ``clip_seconds`` (only that part is read). A file that cannot be decoded (corrupt, empty, not
    audio whatever its suffix) raises `tasks.SkipItem`.

    Args:
        root: Directory searched recursively.
        sampling_rate: Samples per second of the items (16000 is what Qwen2-Audio and Qwen2.5-Omni
            take).
        clip_seconds: Longest item, cut from the middle of longer files; ``None`` keeps whole files.
        extensions: File suffixes to include, matched case-insensitively.
    """

    modality = "audio"

    def __init__(
        self,
        root: str,
        sampling_rate: int = 16000,
        clip_seconds: float | None = 10.0,
        extensions: tuple[str, ...] = (".wav", ".flac", ".ogg"),
    ):
        check_decoding(sampling_rate, clip_seconds)
        self.sampling_rate = sampling_rate
        self.clip_seconds = clip_seconds
        self.root, self.extensions, self.paths = find_files(root, extensions, "AudioFolder")

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Audio:
        return decode(self.paths[index], self.sampling_rate, self.clip_seconds)

    def describe(self, index: int) -> str:
        return self.paths[index]


def check_decoding(sampling_rate: int, clip_seconds: float | None) -> None:
    """Raise ValueError for options `decode` cannot honour."""
    if sampling_rate < 1:
        raise ValueError(f"sampling_rate must be a positive number of Hz, got {sampling_rate}")
    if clip_seconds is not None and not clip_seconds > 0:
        raise ValueError(f"clip_seconds must be > 0 or None, got {clip_seconds}")


def decode(
    path: str | bytes, sampling_rate: int = 16000, clip_seconds: float | None = None, name: str | None = None
) -> Audio:
    """Decode the audio file at ``path`` (or the bytes of one: an HF ``Audio`` column) as
    `AudioFolder` describes; `tasks.SkipItem` naming it (``name``, else ``path``) for anything that
    cannot be decoded."""
    soundfile = _soundfile()
    name = name or ("<audio bytes>" if isinstance(path, bytes) else str(path))
    try:
        check_wav_complete(path)
        with soundfile.SoundFile(io.BytesIO(path) if isinstance(path, bytes) else str(path)) as f:
            rate = f.samplerate
            total = f.frames
            keep = total if clip_seconds is None else min(total, int(round(clip_seconds * rate)))
            f.seek((total - keep) // 2)
            data = f.read(keep, dtype="float32", always_2d=True)  # [S, C]
        if data.shape[0] == 0 or not np.isfinite(data).all():
            raise ValueError(f"{data.shape[0]} samples, finite: {bool(np.isfinite(data).all())}")
    except Exception as err:  # soundfile raises LibsndfileError, RuntimeError, ...: all mean the file is unusable
        reason = (str(err).strip().splitlines() or [""])[0][:300]
        raise SkipItem(f"{name}: {type(err).__name__}: {reason}") from err
    mono = data.mean(axis=1)  # [S]
    return Audio(waveform=resample(mono, rate, sampling_rate), sampling_rate=sampling_rate, name=name)


def _soundfile():
    return require("soundfile", "audio", "audio sources decode with soundfile")


def check_wav_complete(path) -> None:
    """ValueError when a .wav file holds fewer sample bytes than its ``data`` chunk declares:
    libsndfile reads such a truncated file without an error, as a shorter clip."""
    if isinstance(path, bytes):
        data = path
    elif not str(path).lower().endswith(".wav"):
        return
    else:
        with open(path, "rb") as f:
            data = f.read()
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return  # not RIFF/WAVE: soundfile decides
    position = 12
    while position + 8 <= len(data):
        chunk = data[position : position + 4]
        size = int.from_bytes(data[position + 4 : position + 8], "little")
        if chunk == b"data":
            streamed = size in (0, 0xFFFFFFFF)  # writers that did not know the length leave it unset
            if not streamed and position + 8 + size > len(data):
                raise ValueError(
                    f"truncated: {len(data) - position - 8} bytes of samples where the header declares {size}"
                )
            return
        position += 8 + size + size % 2  # chunks are padded to an even size
