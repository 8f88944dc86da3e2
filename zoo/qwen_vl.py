"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL as GRPO policies, through the transformers Auto classes."""

from __future__ import annotations

from torch import nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.policy import PolicyModule

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
MEDIA = {
    "image": MediaSpec(per_item=("image_grid_thw",), flat="pixel_values", grid="image_grid_thw"),
}


def media_parts(example, kind: str) -> list:
    """The media objects of one kind in an example's messages, in order."""
    return [part[kind] for message in example.messages if not isinstance(message["content"], str)
            for part in message["content"] if part["type"] == kind]


class QwenVLPolicy(PolicyModule):
    """A Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision-language policy (images, several per prompt allowed).

    Args:
        pretrained: Hub id (e.g. ``Qwen/Qwen2.5-VL-3B-Instruct``), local directory, or ``tiny:qwen2_5_vl``
            (also ``tiny:qwen2_vl``, ``tiny:qwen3_vl``).
        min_pixels: Lower bound on pixels per image after the processor's resize; None keeps the processor's.
        max_pixels: Upper bound on pixels per image (the main memory knob); None keeps the processor's.
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    modalities = frozenset({"text", "image"})
    tiny_checkpoints = ("tiny:qwen2_vl", "tiny:qwen2_5_vl", "tiny:qwen3_vl")

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
        return model, processor

    def encode(self, examples: list) -> PromptBatch:
        self._check_media(examples)
        texts = [self.processor.apply_chat_template(ex.messages, tokenize=False, add_generation_prompt=True)
                 for ex in examples]
        images = [media_parts(ex, "image") for ex in examples]
        flat_images = [img.convert("RGB") for per_example in images for img in per_example]
        tensors = self.processor(text=texts, images=flat_images or None, padding=True, return_tensors="pt")
        return PromptBatch(tensors=dict(tensors), items={"image": [len(i) for i in images]}, specs=MEDIA)

    def _check_media(self, examples: list) -> None:
        for ex in examples:
            for message in ex.messages:
                content = message["content"]
                kinds = {"text"} if isinstance(content, str) else {part["type"] for part in content}
                if not kinds <= self.modalities:
                    raise ValueError(f"{type(self).__name__} takes {sorted(self.modalities)} content, but an "
                                     f"example of task {ex.task!r} has {sorted(kinds - self.modalities)}")

    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``vision`` (the vision tower without its mergers), ``aligner`` (the mergers), ``llm``."""
        visual = self.model.model.visual
        children = list(visual.named_children())
        return {
            "vision": [m for name, m in children if "merger" not in name],
            "aligner": [m for name, m in children if "merger" in name],
            "llm": [self.model.model.language_model, self.model.lm_head],
        }
