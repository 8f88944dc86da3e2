"""The Qwen2.5-Omni thinker (text output only) as a GRPO policy: audio, images and videos in one prompt."""

from __future__ import annotations

import torch
from torch import nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.media import chat_texts, check_placeholders, media_parts, video_input
from zoo.policy import PolicyModule
from zoo.qwen_audio import AUDIO, check_audio_placeholders, encode_audio

MEDIA = {
    "image": MediaSpec(per_item=("image_grid_thw",), flat="pixel_values", grid="image_grid_thw"),
    "video": MediaSpec(per_item=("video_grid_thw", "video_second_per_grid"), flat="pixel_values_videos",
                       grid="video_grid_thw"),
    "audio": AUDIO,
}


class QwenOmniPolicy(PolicyModule):
    """The thinker of Qwen2.5-Omni: text, audio clips, images and videos, several per prompt, mixed in one
    batch. Loads only the thinker (no talker, no speech output). Video parts carry already-sampled frames and
    their ``fps``; audio parts are resampled to 16 kHz when they come at another rate.

    Args:
        pretrained: Hub id (e.g. ``Qwen/Qwen2.5-Omni-7B``), local directory, ``tiny:qwen2_5_omni``, or
            a zoo checkpoint (see `PolicyModule`).
        min_pixels: Lower bound on pixels per image after the processor's resize; None keeps the processor's.
        max_pixels: Upper bound on pixels per image (the main memory knob); None keeps the processor's.
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    modalities = frozenset({"text", "audio", "image", "video"})
    tiny_checkpoints = ("tiny:qwen2_5_omni",)
    shared_media = ("image", "video")

    def __init__(self, pretrained: str, min_pixels: int | None = None, max_pixels: int | None = None, **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels

    def load(self, path: str):
        from transformers import (
            AutoConfig,
            AutoProcessor,
            Qwen2_5OmniForConditionalGeneration,
            Qwen2_5OmniThinkerForConditionalGeneration,
        )

        model_type = AutoConfig.from_pretrained(path).model_type
        if model_type not in ("qwen2_5_omni", "qwen2_5_omni_thinker"):
            raise ValueError(f"{path} is a {model_type!r} model; QwenOmniPolicy supports Qwen2.5-Omni")
        pixels = {k: v for k, v in (("min_pixels", self.min_pixels), ("max_pixels", self.max_pixels)) if v}
        processor = AutoProcessor.from_pretrained(path, **pixels)
        if model_type == "qwen2_5_omni":  # a full checkpoint: built without the talker, only the thinker kept
            full = Qwen2_5OmniForConditionalGeneration.from_pretrained(path, enable_audio_output=False,
                                                                       **self.load_kwargs())
            model = full.thinker
        else:  # a thinker on its own (the tiny model, or one this policy exported)
            model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path, **self.load_kwargs())
        # an embedding no forward pass uses: it would never get a gradient (DDP and optimizers object)
        model.model.audio_tower.audio_bos_eos_token.requires_grad_(False)
        return model, processor

    def encode(self, examples: list) -> PromptBatch:
        self.check_media(examples)
        texts = chat_texts(self.processor, examples)
        parts = {kind: [media_parts(ex, kind) for ex in examples] for kind in ("image", "video")}
        audio_parts, kwargs = encode_audio(self, examples)
        images = [p["image"].convert("RGB") for per in parts["image"] for p in per]
        videos = [video_input(p) for per in parts["video"] for p in per]
        if images:
            kwargs["images"] = images
        if videos:
            kwargs |= dict(videos=[v for v, _ in videos], video_metadata=[m for _, m in videos],
                           do_sample_frames=False)
        tensors = dict(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))
        if videos:  # the processor assumes one frame rate for all videos: use each video's own
            step = self.processor.video_processor.temporal_patch_size
            tensors["video_second_per_grid"] = torch.tensor([step / m["fps"] for _, m in videos])
        self._check_placeholders(tensors)
        items = {k: [len(p) for p in v] for k, v in parts.items()} | {"audio": [len(p) for p in audio_parts]}
        return PromptBatch(tensors=tensors, items=items, specs=MEDIA)

    def _check_placeholders(self, tensors: dict) -> None:
        merge = self.model.config.vision_config.spatial_merge_size ** 2
        for kind, grid in (("image", "image_grid_thw"), ("video", "video_grid_thw")):
            token = getattr(self.processor, f"{kind}_token")
            expected = int(tensors[grid].prod(-1).sum()) // merge if grid in tensors else 0
            check_placeholders(tensors["input_ids"], self.tokenizer.convert_tokens_to_ids(token), token, kind,
                               expected)
        check_audio_placeholders(self, tensors, self.processor.audio_token)

    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``audio`` (the audio encoder), ``vision`` (the vision tower without its merger), ``aligner`` (the
        vision merger), ``llm``."""
        inner = self.model.model
        children = list(inner.visual.named_children())
        return {
            "audio": [inner.audio_tower],
            "vision": [m for name, m in children if "merger" not in name],
            "aligner": [m for name, m in children if "merger" in name],
            "llm": [inner.language_model, self.model.lm_head],
        }
