"""Media handling shared by the policy families: content parts of a kind, video and audio inputs for
the processors, and the checks that catch mismatched prompts before they fail deep inside a
model."""

from __future__ import annotations

import numpy as np
from torch import Tensor

from tasks.audio.common import resample


def chat_texts(processor, examples: list) -> list[str]:
    """Each example's messages through the processor's chat template, ready for generation."""
    return [processor.apply_chat_template(ex.messages, tokenize=False, add_generation_prompt=True) for ex in examples]


def media_parts(example, kind: str) -> list[dict]:
    """The content parts of one kind in an example's messages, in order."""
    return [
        part
        for message in example.messages
        if not isinstance(message["content"], str)
        for part in message["content"]
        if part["type"] == kind
    ]


def video_input(part: dict) -> tuple[np.ndarray, dict]:
    """Frames ``[T, H, W, 3]`` of a video part and the metadata the processors need (no resampling:
    the source already sampled the frames, at ``part["fps"]`` frames per second)."""
    frames = part["video"]
    frames = np.stack([np.asarray(f.convert("RGB")) for f in frames]) if isinstance(frames, list) else frames
    metadata = {"fps": float(part["fps"]), "total_num_frames": len(frames), "frames_indices": list(range(len(frames)))}
    return frames, metadata


def audio_input(part: dict, sampling_rate: int) -> np.ndarray:
    """The waveform ``[S]`` float32 of an audio part at the processor's ``sampling_rate`` (resampled
    if needed)."""
    wave = np.asarray(part["audio"], dtype=np.float32)
    if wave.ndim != 1:
        raise ValueError(f"an audio part must hold a mono waveform [S], got shape {wave.shape}")
    return resample(wave, int(part["sampling_rate"]), sampling_rate)


def check_placeholders(
    input_ids: Tensor,
    token_id: int,
    token: str,
    kind: str,
    expected: int,
    hint: str = "does the chat template keep every media part, and is nothing truncated?",
) -> None:
    """The prompts ``input_ids`` must hold exactly the ``expected`` placeholder tokens that the
    ``kind`` inputs fill (a template that drops them, a processor that does not match the model, or
    truncation would otherwise fail deep inside the model); ``hint`` ends the error with the likely
    causes."""
    found = int((input_ids == token_id).sum())
    if found != expected:
        raise ValueError(f"the prompts hold {found} {token} tokens but the {kind} inputs need {expected}: {hint}")
