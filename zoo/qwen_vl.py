"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL as GRPO policies, through the transformers Auto classes."""

from __future__ import annotations

from torch import nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.media import chat_texts, check_placeholders, media_parts, video_input
from zoo.policy import PolicyModule

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
MEDIA = {
    "image": MediaSpec(per_item=("image_grid_thw",), flat="pixel_values", grid="image_grid_thw"),
    "video": MediaSpec(per_item=("video_grid_thw", "second_per_grid_ts"), flat="pixel_values_videos",
                       grid="video_grid_thw"),
}
PLACEHOLDERS = {"image": ("<|image_pad|>", "image_grid_thw"), "video": ("<|video_pad|>", "video_grid_thw")}


class QwenVLPolicy(PolicyModule):
    """A Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision-language policy: images and videos, several per prompt,
    mixed in one batch. Video parts carry already-sampled frames and their ``fps`` (Qwen2.5-VL turns it into
    ``second_per_grid_ts``, Qwen3-VL into timestamps in the prompt).

    Args:
        pretrained: Hub id (e.g. ``Qwen/Qwen2.5-VL-3B-Instruct``), local directory, or ``tiny:qwen2_5_vl``
            (also ``tiny:qwen2_vl``, ``tiny:qwen3_vl``), or a zoo checkpoint (see `PolicyModule`).
        min_pixels: Lower bound on pixels per image after the processor's resize; None keeps the processor's.
        max_pixels: Upper bound on pixels per image (the main memory knob); None keeps the processor's.
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    modalities = frozenset({"text", "image", "video"})
    tiny_checkpoints = ("tiny:qwen2_vl", "tiny:qwen2_5_vl", "tiny:qwen3_vl")
    shared_media = ("image", "video")

    def __init__(self, pretrained: str, min_pixels: int | None = None,
                 max_pixels: int | None = None, **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels

    def load(self, path: str):
        from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

        model_type = AutoConfig.from_pretrained(path).model_type
        if model_type not in FAMILIES:
            raise ValueError(f"{path} is a {model_type!r} model; QwenVLPolicy supports {FAMILIES}")
        pixels = {k: v for k, v in (("min_pixels", self.min_pixels), ("max_pixels", self.max_pixels)) if v}
        processor = AutoProcessor.from_pretrained(path, **pixels)
        model = AutoModelForImageTextToText.from_pretrained(path, **self.load_kwargs())
        # Qwen3-VL: cap pixels per frame as the reference implementation (qwen-vl-utils) does
        self._video_kwargs = {"cap_pixels_per_frame": True} if model_type == "qwen3_vl" else {}
        return model, processor

    def encode(self, examples: list) -> PromptBatch:
        self.check_media(examples)
        texts = chat_texts(self.processor, examples)
        parts = {kind: [media_parts(ex, kind) for ex in examples] for kind in ("image", "video")}
        kwargs = {"images": [p["image"].convert("RGB") for per in parts["image"] for p in per] or None}
        videos = [video_input(p) for per in parts["video"] for p in per]
        if videos:
            kwargs |= dict(videos=[v for v, _ in videos], video_metadata=[m for _, m in videos],
                           do_sample_frames=False, **self._video_kwargs)
        tensors = dict(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))
        self._check_placeholders(tensors)
        return PromptBatch(tensors=tensors, items={k: [len(p) for p in v] for k, v in parts.items()}, specs=MEDIA)

    def _check_placeholders(self, tensors: dict) -> None:
        merge = self.model.config.vision_config.spatial_merge_size ** 2
        for kind, (token, grid) in PLACEHOLDERS.items():
            expected = int(tensors[grid].prod(-1).sum()) // merge if grid in tensors else 0
            check_placeholders(tensors["input_ids"], self.tokenizer.convert_tokens_to_ids(token), token, kind,
                               expected)


    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``vision`` (the vision tower without its mergers), ``aligner`` (the mergers), ``llm``."""
        visual = self.model.model.visual
        children = list(visual.named_children())
        return {
            "vision": [m for name, m in children if "merger" not in name],
            "aligner": [m for name, m in children if "merger" in name],
            "llm": [self.model.model.language_model, self.model.lm_head],
        }
