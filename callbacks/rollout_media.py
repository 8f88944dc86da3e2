"""What a rollout's prompt shows, in the forms loggers take: one image strip (the pictures `zoo
preview` draws, side by side), one audio track (the prompt's audio parts in order) and, for a
multi-turn row, one strip of what its tools returned."""

from __future__ import annotations

import io
import wave

import numpy as np
from PIL import Image

from tasks import Example
from zoo.panels import panels

THUMB_HEIGHT = 128  # pixels of each picture in a strip
AUDIO_GAP_S = 0.25  # silence between two audio parts of one prompt


def _parts(example) -> list[dict]:
    return [part for message in example.messages if isinstance(message["content"], list) for part in message["content"]]


def media_strip(example) -> np.ndarray | None:
    """The pictures `zoo preview` draws of an example's prompt, side by side at `THUMB_HEIGHT`,
    ``[H, W, 3]`` uint8: its images, evenly spaced frames of each video, a spectrogram of each audio
    part and a front view of each point cloud, in prompt order. None for a text-only prompt."""
    return _strip(panels(example))


def tool_strip(messages: list[dict]) -> np.ndarray | None:
    """The pictures of the tool results of a multi-turn row (``messages``: the user messages its
    tools added to the conversation, `tool_results`) side by side as in `media_strip`; None when
    its tools returned no picture (or it made no call)."""
    return _strip(panels(Example(messages, None, "tools")))


def tool_results(conversation: list[dict], prompt: list[dict]) -> list[dict]:
    """The user messages a row's tools added after ``prompt`` (the example's messages) in
    ``conversation`` (the one its last turn was sampled from)."""
    return [message for message in conversation[len(prompt) :] if message["role"] == "user"]


def _strip(pictures: list) -> np.ndarray | None:
    thumbs = [_thumbnail(panel.image) for panel in pictures]
    if not thumbs:
        return None
    gap = np.full((THUMB_HEIGHT, 4, 3), 255, np.uint8)
    return np.concatenate([x for thumb in thumbs for x in (thumb, gap)][:-1], axis=1)


def _thumbnail(image: Image.Image) -> np.ndarray:
    width = max(1, round(image.width * THUMB_HEIGHT / image.height))
    return np.asarray(image.convert("RGB").resize((width, THUMB_HEIGHT)))  # [THUMB_HEIGHT, width, 3]


def audio_track(example) -> tuple[np.ndarray, int] | None:
    """The audio parts of an example's prompt as one float32 waveform in [-1, 1] (parts joined by
    `AUDIO_GAP_S` of silence, at the first part's sampling rate) and that rate; None without
    audio."""
    clips = [part for part in _parts(example) if part["type"] == "audio"]
    if not clips:
        return None
    rate = int(clips[0]["sampling_rate"])
    gap = np.zeros(int(rate * AUDIO_GAP_S), np.float32)
    pieces = [x for clip in clips for x in (np.asarray(clip["audio"], np.float32).reshape(-1), gap)][:-1]
    return np.clip(np.concatenate(pieces), -1.0, 1.0), rate  # [S]


def wav_bytes(waveform: np.ndarray, sampling_rate: int) -> bytes:
    """A mono 16-bit PCM WAV file of ``waveform`` (float in [-1, 1], ``[S]``)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(sampling_rate)
        f.writeframes((np.clip(waveform, -1.0, 1.0) * 32767).astype("<i2").tobytes())
    return buffer.getvalue()
