"""Hugging Face image-text-to-text models beyond Qwen (Idefics3 / SmolVLM, Gemma 3, LLaVA-OneVision) as policies.

Families differ in how an image reaches the model: Idefics3 splits it into crops (a row-by-column grid of
``<row_i_col_j>`` tiles plus a ``<global-img>`` view, framed by ``<fake_token_around_image>``) padded per prompt
into ``pixel_values [B, crops, 3, H, W]`` with a ``pixel_attention_mask``; Gemma 3 resizes it to one fixed size,
``pixel_values [images, 3, H, W]``, and marks image tokens in ``token_type_ids``; LLaVA-OneVision tiles an image
alone in its prompt (anyres: ``pixel_values [images, tiles, 3, H, W]`` padded over tiles, ``image_sizes``) but not
the images of a multi-image prompt (``batch_num_images``). A `Family` says which layout a model type uses and
how many placeholder tokens its images need; adding a family is one entry in `FAMILIES`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.policy import PolicyModule
from zoo.qwen_vl import FAMILIES as QWEN_FAMILIES
from zoo.qwen_vl import media_parts


def _crop_tokens(config, tensors: dict[str, Tensor]) -> int:
    """Idefics3: every real crop (padding crops have an all-zero mask) becomes (patches / scale²) tokens."""
    vision = config.vision_config
    per_crop = (vision.image_size // vision.patch_size) ** 2 // config.scale_factor ** 2
    return per_crop * int(tensors["pixel_attention_mask"].flatten(2).any(-1).sum())  # mask [B, crops, H, W]


def _fixed_tokens(config, tensors: dict[str, Tensor]) -> int:
    """Gemma 3: every image becomes ``mm_tokens_per_image`` tokens."""
    return config.mm_tokens_per_image * len(tensors["pixel_values"])  # [images, 3, H, W]


def _anyres_tokens(config, tensors: dict[str, Tensor]) -> int:
    """LLaVA-OneVision: an image alone in its prompt is a base tile plus its tile grid with padding cut off and
    one newline per row, shrunk to at most ``anyres_max_N`` tiles; in a multi-image prompt, base tile + newline."""
    from transformers.models.llava_onevision.modeling_llava_onevision import (
        get_anyres_image_grid_shape,
        unpad_image,
    )

    side, tile = config.vision_config.image_size // config.vision_config.patch_size, config.vision_config.image_size
    max_tiles = int(config.vision_aspect_ratio.removeprefix("anyres_max_"))
    alone = [n == 1 for n in tensors["batch_num_images"].tolist() for _ in range(n)]
    total = 0
    for size, single in zip(tensors["image_sizes"], alone, strict=True):  # size: [2] (H, W)
        height = width = 0
        if single:
            rows, cols = get_anyres_image_grid_shape(size, config.image_grid_pinpoints, tile)
            height, width = unpad_image(torch.empty(0, rows * side, cols * side), size).shape[1:]
            ratio = math.sqrt(height * width / (max_tiles * side ** 2))
            height, width = (int(height // ratio), int(width // ratio)) if ratio > 1.1 else (height, width)
        total += side * side + (height * (width + 1) if single else 1)
    return total


@dataclass(frozen=True)
class Family:
    """How a model type lays out its images.

    Args:
        image: Layout of the image tensors in the processor output.
        image_tokens: Placeholder tokens the image tensors of a batch need, from the model config.
    """

    image: MediaSpec
    image_tokens: Callable[[object, dict[str, Tensor]], int]


FAMILIES = {"idefics3": Family(MediaSpec(per_row=("pixel_values", "pixel_attention_mask")), _crop_tokens),
            "gemma3": Family(MediaSpec(per_item=("pixel_values",)), _fixed_tokens),
            "llava_onevision": Family(MediaSpec(per_item=("pixel_values", "image_sizes"), counts="batch_num_images"),
                                      _anyres_tokens)}
# media placeholders and image-structure tokens: a sampled one breaks the next forward
BANNED = re.compile(PolicyModule.banned_special.pattern + r"|<global-img>|<row_\d+_col_\d+>", re.IGNORECASE)
GROUPS = {"vision": ("vision_tower", "vision_model"), "aligner": ("multi_modal_projector", "connector"),
          "llm": ("language_model", "text_model")}


def content_parts(messages: list[dict]) -> list[dict]:
    """Messages with string content turned into one text part (templates of several families iterate parts)."""
    return [m | {"content": [{"type": "text", "text": m["content"]}]} if isinstance(m["content"], str) else m
            for m in messages]


class HFVLMPolicy(PolicyModule):
    """A Hugging Face vision-language policy loaded with ``AutoModelForImageTextToText`` + ``AutoProcessor``:
    Idefics3 / SmolVLM, Gemma 3 and LLaVA-OneVision (Qwen-VL models: `zoo.QwenVLPolicy`). Images, several per
    prompt, mixed with text-only prompts in one batch; the checkpoint's own chat template renders them.

    Args:
        pretrained: Hub id (e.g. ``HuggingFaceTB/SmolVLM-256M-Instruct``, ``google/gemma-3-4b-it``,
            ``llava-hf/llava-onevision-qwen2-0.5b-ov-hf``), local directory, or ``tiny:idefics3`` /
            ``tiny:gemma3`` / ``tiny:llava_onevision``, or a zoo checkpoint (see `PolicyModule`).
        trust_remote_code: Let the checkpoint run its own Python code from the hub (only for checkpoints that
            need it; the model type must still be one of the supported families).
        processor_kwargs: Overrides for ``AutoProcessor.from_pretrained``, e.g. ``{size: {longest_edge: 1024}}``
            to cut SmolVLM's image splitting (the main memory knob: every crop is 64 tokens).
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    modalities = frozenset({"text", "image"})
    tiny_checkpoints = ("tiny:idefics3", "tiny:gemma3", "tiny:llava_onevision")
    banned_special = BANNED

    def __init__(self, pretrained: str, trust_remote_code: bool = False, processor_kwargs: dict | None = None,
                 **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        self.trust_remote_code = trust_remote_code
        self.processor_kwargs = dict(processor_kwargs or {})

    def load(self, path: str):
        from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

        remote = {"trust_remote_code": self.trust_remote_code}
        model_type = AutoConfig.from_pretrained(path, **remote).model_type
        if model_type in QWEN_FAMILIES:
            raise ValueError(f"{path} is a {model_type!r} model: use zoo.QwenVLPolicy")
        if model_type not in FAMILIES:
            raise ValueError(f"{path} is a {model_type!r} model; HFVLMPolicy supports {sorted(FAMILIES)}")
        processor = AutoProcessor.from_pretrained(path, **remote, **self.processor_kwargs)
        if getattr(processor.image_processor, "do_pan_and_scan", False):
            raise ValueError(f"{path}: Gemma 3 pan-and-scan crops are not supported; set do_pan_and_scan=False")
        self.family = FAMILIES[model_type]
        return AutoModelForImageTextToText.from_pretrained(path, **remote, **self.load_kwargs()), processor

    def encode(self, examples: list) -> PromptBatch:
        self.check_media(examples)
        texts = [self.processor.apply_chat_template(content_parts(ex.messages), tokenize=False,
                                                    add_generation_prompt=True) for ex in examples]
        images = [[part["image"].convert("RGB") for part in media_parts(ex, "image")] for ex in examples]
        kwargs = {"images": images} if any(images) else {}  # nested: one list per prompt, empty for text-only
        tensors = dict(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))
        self._check_placeholders(tensors, bool(kwargs))
        return PromptBatch(tensors=tensors, items={"image": [len(i) for i in images]},
                           specs={"image": self.family.image})

    def _check_placeholders(self, tensors: dict[str, Tensor], has_images: bool) -> None:
        """The prompts must hold exactly the placeholder tokens the model fills with image features (a
        processor that does not match the model, or truncation, would otherwise fail deep inside it)."""
        config = self.model.config
        expected = self.family.image_tokens(config, tensors) if has_images else 0
        found = int((tensors["input_ids"] == config.image_token_id).sum())
        if found != expected:
            token = self.tokenizer.convert_ids_to_tokens(config.image_token_id)
            raise ValueError(f"the prompts hold {found} {token} tokens but the images need {expected}: does the "
                             "processor match the model (image_seq_len, image size), and is nothing truncated?")

    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``vision`` (the vision tower), ``aligner`` (the projector / connector), ``llm`` (LM and head)."""
        inner = self.model.model
        groups = {name: [getattr(inner, a) for a in attrs if hasattr(inner, a)] for name, attrs in GROUPS.items()}
        groups["llm"].append(self.model.lm_head)
        if isinstance(getattr(inner, "image_newline", None), nn.Parameter):  # LLaVA-OneVision's row separator
            groups["aligner"].append(nn.ParameterList([inner.image_newline]))  # the same tensor, as a module
        return groups
