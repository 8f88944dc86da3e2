"""Hugging Face image-text-to-text models beyond Qwen (Idefics3 / SmolVLM, Gemma 3, LLaVA-OneVision)
as policies.

Families differ in how an image reaches the model: Idefics3 splits it into crops (a row-by-column
grid of ``<row_i_col_j>`` tiles plus a ``<global-img>`` view, framed by
``<fake_token_around_image>``) padded per prompt into ``pixel_values [B, crops, 3, H, W]`` with a
``pixel_attention_mask``; Gemma 3 resizes it to one fixed size, ``pixel_values [images, 3, H, W]``,
and marks image tokens in ``token_type_ids``; LLaVA-OneVision tiles an image alone in its prompt
(anyres: ``pixel_values [images, tiles, 3, H, W]`` padded over tiles, ``image_sizes``) but not the
images of a multi-image prompt (``batch_num_images``). A `Family` says which layout a model type
uses and how many placeholder tokens its images need; adding a family is one entry in `FAMILIES`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.media import check_placeholders, media_parts
from zoo.policy import PolicyModule
from zoo.qwen_vl import FAMILIES as QWEN_FAMILIES
from zoo.tiny import CHAT_TEMPLATE, TEXT, VOCAB_SIZE, Tiny, build_tokenizer, text_config


def _crop_tokens(config, tensors: dict[str, Tensor]) -> int:
    """Idefics3: every real crop (padding crops have an all-zero mask) becomes (patches / scale²)
    tokens."""
    vision = config.vision_config
    per_crop = (vision.image_size // vision.patch_size) ** 2 // config.scale_factor**2
    return per_crop * int(tensors["pixel_attention_mask"].flatten(2).any(-1).sum())  # mask [B, crops, H, W]


def _fixed_tokens(config, tensors: dict[str, Tensor]) -> int:
    """Gemma 3: every image becomes ``mm_tokens_per_image`` tokens."""
    return config.mm_tokens_per_image * len(tensors["pixel_values"])  # [images, 3, H, W]


def _anyres_tokens(config, tensors: dict[str, Tensor]) -> int:
    """LLaVA-OneVision: an image alone in its prompt is a base tile plus its tile grid with padding
    cut off and one newline per row, shrunk to at most ``anyres_max_N`` tiles; in a multi-image
    prompt, base tile + newline."""
    from transformers.models.llava_onevision.modeling_llava_onevision import (
        get_anyres_image_grid_shape,
        unpad_image,
    )

    side = config.vision_config.image_size // config.vision_config.patch_size
    tile = config.vision_config.image_size
    max_tiles = int(config.vision_aspect_ratio.removeprefix("anyres_max_"))
    alone = [n == 1 for n in tensors["batch_num_images"].tolist() for _ in range(n)]
    total = 0
    for size, single in zip(tensors["image_sizes"], alone, strict=True):  # size: [2] (H, W)
        height = width = 0
        if single:
            rows, cols = get_anyres_image_grid_shape(size, config.image_grid_pinpoints, tile)
            height, width = unpad_image(torch.empty(0, rows * side, cols * side), size).shape[1:]
            ratio = math.sqrt(height * width / (max_tiles * side**2))
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


FAMILIES = {
    "idefics3": Family(MediaSpec(per_row=("pixel_values", "pixel_attention_mask")), _crop_tokens),
    "gemma3": Family(MediaSpec(per_item=("pixel_values",)), _fixed_tokens),
    "llava_onevision": Family(
        MediaSpec(per_item=("pixel_values", "image_sizes"), counts="batch_num_images"), _anyres_tokens
    ),
}
# media placeholders and image-structure tokens: a sampled one breaks the next forward
BANNED = re.compile(PolicyModule.banned_special.pattern + r"|<global-img>|<row_\d+_col_\d+>", re.IGNORECASE)
GROUPS = {
    "vision": ("vision_tower", "vision_model"),
    "aligner": ("multi_modal_projector", "connector"),
    "llm": ("language_model", "text_model"),
}


def content_parts(messages: list[dict]) -> list[dict]:
    """Messages with string content turned into one text part (templates of several families iterate
    parts)."""
    return [
        m | {"content": [{"type": "text", "text": m["content"]}]} if isinstance(m["content"], str) else m
        for m in messages
    ]


class HFVLMPolicy(PolicyModule):
    """A Hugging Face vision-language policy loaded with ``AutoModelForImageTextToText`` +
    ``AutoProcessor``: Idefics3 / SmolVLM, Gemma 3 and LLaVA-OneVision (Qwen-VL models:
    `zoo.QwenVLPolicy`). Images, several per prompt, mixed with text-only prompts in one batch; the
    checkpoint's own chat template renders them.

    Args:
        pretrained: Hub id (e.g. ``HuggingFaceTB/SmolVLM-256M-Instruct``, ``google/gemma-3-4b-it``,
            ``llava-hf/llava-onevision-qwen2-0.5b-ov-hf``), local directory, or ``tiny:idefics3`` /
            ``tiny:gemma3`` / ``tiny:llava_onevision``, or a zoo checkpoint (see `PolicyModule`).
        trust_remote_code: Let the checkpoint run its own Python code from the hub (only for
            checkpoints that need it; the model type must still be one of the supported families).
        processor_kwargs: Overrides for ``AutoProcessor.from_pretrained``, e.g. ``{size:
            {longest_edge: 1024}}`` to cut SmolVLM's image splitting (the main memory knob: every
            crop is 64 tokens).
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    content_kinds = frozenset({"text", "image"})
    tiny_checkpoints = ("tiny:idefics3", "tiny:gemma3", "tiny:llava_onevision")
    banned_special = BANNED

    def __init__(
        self, pretrained: str, trust_remote_code: bool = False, processor_kwargs: dict | None = None, **kwargs
    ):
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
        texts = [
            self.processor.apply_chat_template(content_parts(ex.messages), tokenize=False, add_generation_prompt=True)
            for ex in examples
        ]
        images = [[part["image"].convert("RGB") for part in media_parts(ex, "image")] for ex in examples]
        kwargs = {"images": images} if any(images) else {}  # nested: one list per prompt, empty for text-only
        tensors = dict(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))
        self._check_placeholders(tensors, bool(kwargs))
        return PromptBatch(
            tensors=tensors, items={"image": [len(i) for i in images]}, specs={"image": self.family.image}
        )

    def _check_placeholders(self, tensors: dict[str, Tensor], has_images: bool) -> None:
        config = self.model.config
        token = self.tokenizer.convert_ids_to_tokens(config.image_token_id)
        check_placeholders(
            tensors["input_ids"],
            config.image_token_id,
            token,
            "image",
            self.family.image_tokens(config, tensors) if has_images else 0,
            hint="does the processor match the model (image_seq_len, image size), and is nothing truncated?",
        )

    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``vision`` (the vision tower), ``aligner`` (the projector / connector), ``llm`` (LM and
        head)."""
        inner = self.model.model
        groups = {name: [getattr(inner, a) for a in attrs if hasattr(inner, a)] for name, attrs in GROUPS.items()}
        groups["llm"].append(self.model.lm_head)
        if isinstance(getattr(inner, "image_newline", None), nn.Parameter):  # LLaVA-OneVision's row separator
            groups["aligner"].append(nn.ParameterList([inner.image_newline]))  # the same tensor, as a module
        return groups

    def packing_refused(self) -> str | None:
        """Gemma 3 cannot pack: its image tokens attend to each other both ways through a mask
        overlay indexed by sequence position, which Hugging Face's packed mask looks up at the
        per-row positions instead (``remap_positions_for_packed_sequence``, transformers 5.24), so
        image tokens would attend to the wrong tokens."""
        if self.model.config.model_type == "gemma3":
            return (
                "Gemma 3's bidirectional image-token mask is indexed by sequence position, which "
                "transformers' packed mask remaps to per-row positions (wrong tokens would attend)"
            )
        return super().packing_refused()


# ---- tiny random-init models (`zoo.tiny`)
# ---------------------------------------------------------- Idefics3 / SmolVLM: each image becomes
# crops of 32 px (a row-by-column grid plus a global view), each crop 16 patches pixel-shuffled into
# 4 <image> tokens; the template writes one <image> per image, as SmolVLM's does.
IDEFICS3_TOKENS = (
    "<fake_token_around_image>",
    "<image>",
    "<end_of_utterance>",
    "<global-img>",
    *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
)
IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for m in messages %}{{ m.role | capitalize }}:"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}"
    "{%- if c.type == 'image' %}<image>{% elif c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)
# Gemma 3: a fixed 32 px image, 16 patches average-pooled into 4 <image_soft_token>s; the template
# writes <start_of_image>, which the processor expands to <start_of_image> + soft tokens +
# <end_of_image>.
GEMMA3_TOKENS = ("<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<image_soft_token>", "<end_of_image>")
GEMMA3_TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}"
    "{%- if c.type == 'image' %}<start_of_image>{% elif c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}"
    "{% endif %}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
VISION = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8
)


def _idefics3():
    from transformers import Idefics3Config, Idefics3ImageProcessor, Idefics3Processor

    tok = build_tokenizer(IDEFICS3_TOKENS)
    tok.eos_token = "<end_of_utterance>"
    eos, pad, image = tok.convert_tokens_to_ids(["<end_of_utterance>", "<|endoftext|>", "<image>"])
    config = Idefics3Config(
        text_config=dict(
            TEXT,
            model_type="llama",
            vocab_size=VOCAB_SIZE,
            head_dim=16,
            eos_token_id=eos,
            pad_token_id=pad,
            bos_token_id=None,
        ),
        vision_config=VISION,
        scale_factor=2,
        image_token_id=image,
        pad_token_id=pad,
    )
    image_processor = Idefics3ImageProcessor(size={"longest_edge": 64}, max_image_size={"longest_edge": 32})
    return config, Idefics3Processor(
        image_processor=image_processor, tokenizer=tok, image_seq_len=4, chat_template=IDEFICS3_TEMPLATE
    )


def _gemma3():
    from transformers import Gemma3Config, Gemma3ImageProcessor, Gemma3Processor

    tok = build_tokenizer(
        GEMMA3_TOKENS,
        {"boi_token": "<start_of_image>", "image_token": "<image_soft_token>", "eoi_token": "<end_of_image>"},
    )
    tok.eos_token = "<end_of_turn>"
    ids = tok.convert_tokens_to_ids
    config = Gemma3Config(
        text_config=dict(
            TEXT,
            vocab_size=VOCAB_SIZE,
            head_dim=16,
            sliding_window=64,
            eos_token_id=ids("<end_of_turn>"),
            pad_token_id=ids("<|endoftext|>"),
            bos_token_id=None,
            layer_types=["sliding_attention", "full_attention"],
        ),
        vision_config=VISION,
        mm_tokens_per_image=4,
        boi_token_index=ids("<start_of_image>"),
        eoi_token_index=ids("<end_of_image>"),
        image_token_index=ids("<image_soft_token>"),
    )
    image_processor = Gemma3ImageProcessor(size={"height": 32, "width": 32})
    return config, Gemma3Processor(
        image_processor=image_processor, tokenizer=tok, image_seq_length=4, chat_template=GEMMA3_TEMPLATE
    )


def _llava_onevision():
    """Anyres tiling: an image alone in its prompt becomes a 32 px base tile plus a grid of 32 px
    tiles (up to 2x2), 16 <image> tokens each before unpadding; in a multi-image prompt, only the
    base tile."""
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    tok = build_tokenizer(("<image>", "<video>"))
    ids = tok.convert_tokens_to_ids
    pinpoints = [[32, 32], [32, 64], [64, 32], [64, 64]]
    config = LlavaOnevisionConfig(
        text_config=dict(
            text_config(tok), model_type="qwen2", rope_parameters={"rope_type": "default", "rope_theta": 1e6}
        ),
        vision_config=dict(VISION, model_type="siglip_vision_model"),
        image_token_index=ids("<image>"),
        video_token_index=ids("<video>"),
        image_grid_pinpoints=pinpoints,
        vision_feature_select_strategy="full",
    )
    image = LlavaOnevisionImageProcessor(size={"height": 32, "width": 32}, image_grid_pinpoints=pinpoints)
    video = LlavaOnevisionVideoProcessor(size={"height": 32, "width": 32})
    template = CHAT_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<image>").replace(
        "<|vision_start|><|video_pad|><|vision_end|>", "<video>"
    )
    return config, LlavaOnevisionProcessor(
        image_processor=image,
        video_processor=video,
        tokenizer=tok,
        num_image_tokens=16,
        vision_feature_select_strategy="full",
        chat_template=template,
    )


def _gemma3_init(model) -> None:
    """Gemma 3 zero-initialises its projector, which would hide the images from a random-init
    model."""
    torch.nn.init.normal_(model.model.multi_modal_projector.mm_input_projection_weight, std=0.02)


TINY = {
    "idefics3": Tiny(_idefics3),
    "gemma3": Tiny(_gemma3, init=_gemma3_init),
    "llava_onevision": Tiny(_llava_onevision),
}
