"""What both frameworks of `zoo speed` run with: the settings, the model (loaded, or a
``tiny:qwen2_5_vl_3b`` cut to a few layers in memory), its processor with the pixel bound, the
rotation prompts over synthetic scenes, and the peak-memory reading."""

from __future__ import annotations

import resource
import tempfile
from dataclasses import dataclass

import torch


@dataclass
class Settings:
    """What both frameworks run with.

    Args:
        model: The policy: a hub id, a local directory or ``tiny:<family>`` (`zoo.tiny`).
        prompts: Prompts per step.
        generations: Completions sampled per prompt.
        max_new_tokens: Completion length (sampling stops at EOS, or here).
        steps: Timed steps, after the warm-up.
        warmup: Steps run first and not timed.
        lr: AdamW learning rate.
        dtype: Model dtype: float32, bfloat16 or float16.
        image_size: Side of the synthetic square images, in pixels.
        seed: Selects the prompts and seeds the sampling.
        share_prefix: zoo only: prefill each prompt once (TRL repeats prompts G times).
        cache_implementation: zoo only: ``dynamic`` or ``static`` KV cache for sampling.
        text_layers: With ``tiny:qwen2_5_vl_3b``: build it in memory (random weights, seeded) with
            only this many decoder layers, its widths and vocabulary kept, instead of the saved
            36-layer model; None loads ``model`` as it is.
        vision_blocks: The vision blocks of that in-memory model.
        suppress_eos: Never sample an EOS id, in both frameworks, so every completion runs to
            ``max_new_tokens`` and both do the same decoding work.
        loop: zoo only: the decoding loop of `zoo.rollout.HFEngine` (``zoo``, ``forward`` or
            ``generate``).
        max_pixels: Upper bound on the pixels of an image after both frameworks' processor resize
            (reloaded with it, as `zoo.QwenVLPolicy` loads one); None keeps the processor's (the
            tiny ones stop at 224 x 224, so 448 px images need ``200704``).
    """

    model: str = "tiny:qwen2_5_vl"
    prompts: int = 4
    generations: int = 8
    max_new_tokens: int = 16
    steps: int = 6
    warmup: int = 2
    lr: float = 1e-5
    dtype: str = "float32"
    image_size: int = 56
    seed: int = 0
    share_prefix: bool = True
    cache_implementation: str = "dynamic"
    text_layers: int | None = None
    vision_blocks: int = 1
    suppress_eos: bool = False
    loop: str = "zoo"
    max_pixels: int | None = None


def in_memory(settings: Settings) -> tuple | None:
    """``(model, processor)`` of a ``tiny:qwen2_5_vl_3b`` cut to ``text_layers`` decoder layers,
    or None when ``model`` is loaded as it is."""
    if settings.text_layers is None:
        return None
    if settings.model != "tiny:qwen2_5_vl_3b":
        raise ValueError(f"text_layers needs model tiny:qwen2_5_vl_3b, got {settings.model!r}")
    from transformers import AutoModelForImageTextToText

    from zoo.policy import DTYPES
    from zoo.qwen_vl import _qwen2_5_vl_3b

    config, processor = _qwen2_5_vl_3b(settings.text_layers, settings.vision_blocks)
    torch.manual_seed(settings.seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=DTYPES[settings.dtype])
    model.generation_config.eos_token_id = config.get_text_config().eos_token_id
    model.generation_config.pad_token_id = config.get_text_config().pad_token_id
    return model, processor


def bounded(processor, settings: Settings):
    """``processor`` saved and loaded again with ``settings.max_pixels`` (what a user's
    ``max_pixels`` does), or as it is without one."""
    if settings.max_pixels is None:
        return processor
    from transformers import AutoProcessor

    from zoo.qwen_vl import pixel_bounds

    with tempfile.TemporaryDirectory() as folder:
        processor.save_pretrained(folder)
        return AutoProcessor.from_pretrained(folder, **pixel_bounds(None, settings.max_pixels))


def rotation_task():
    from tasks import Rotation

    return Rotation(labels="letters", answer_format="bare")


def scenes(settings: Settings):
    from datamodules import SyntheticScenes

    return SyntheticScenes(
        size=settings.prompts * (settings.steps + settings.warmup) + 8,
        image_size=settings.image_size,
        seed=settings.seed,
    )


def peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux
