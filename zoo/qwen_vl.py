"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL as GRPO policies, through the transformers Auto classes.

The image and video handling here (processor inputs, placeholder counts, vision module groups, the
tiny processors) also serves the vision side of `zoo.QwenOmniPolicy`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.media import chat_texts, check_placeholders, media_parts, video_input
from zoo.policy import PolicyModule
from zoo.tiny import CHAT_TEMPLATE, ROPE, Tiny, build_tokenizer, text_config, token_ids

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
IMAGE = MediaSpec(per_item=("image_grid_thw",), flat="pixel_values", grid="image_grid_thw")
MEDIA = {
    "image": IMAGE,
    "video": MediaSpec(
        per_item=("video_grid_thw", "second_per_grid_ts"), flat="pixel_values_videos", grid="video_grid_thw"
    ),
}
PLACEHOLDERS = {"image": "<|image_pad|>", "video": "<|video_pad|>"}


def pixel_bounds(min_pixels: int | None, max_pixels: int | None) -> dict:
    """``AutoProcessor.from_pretrained`` overrides for the bounds that are set."""
    return {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v}


def vision_inputs(examples: list, **video_kwargs) -> tuple[dict[str, list[list[dict]]], dict]:
    """The image and video parts of each example, and the processor keyword arguments for them
    (frames already sampled by the source, each video with its own metadata); none for a kind absent
    from the batch."""
    parts = {kind: [media_parts(ex, kind) for ex in examples] for kind in ("image", "video")}
    kwargs = {}
    images = [p["image"].convert("RGB") for per in parts["image"] for p in per]
    if images:
        kwargs["images"] = images
    videos = [video_input(p) for per in parts["video"] for p in per]
    if videos:
        kwargs |= dict(
            videos=[v for v, _ in videos], video_metadata=[m for _, m in videos], do_sample_frames=False, **video_kwargs
        )
    return parts, kwargs


def check_vision_placeholders(policy: PolicyModule, tensors: dict[str, Tensor], tokens: dict[str, str]) -> None:
    """As many placeholder ``tokens`` (per kind) as the vision tower outputs for the kind's patch
    grids."""
    merge = policy.model.config.vision_config.spatial_merge_size**2
    for kind, token in tokens.items():
        grid = f"{kind}_grid_thw"
        expected = int(tensors[grid].prod(-1).sum()) // merge if grid in tensors else 0  # grid [items, 3]
        check_placeholders(tensors["input_ids"], policy.tokenizer.convert_tokens_to_ids(token), token, kind, expected)


def vision_groups(visual: nn.Module) -> dict[str, list[nn.Module]]:
    """``vision`` (the vision tower without its mergers) and ``aligner`` (the mergers into the
    LM)."""
    children = list(visual.named_children())
    return {
        "vision": [m for name, m in children if "merger" not in name],
        "aligner": [m for name, m in children if "merger" in name],
    }


class QwenVLPolicy(PolicyModule):
    """A Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision-language policy: images and videos, several per
    prompt, mixed in one batch. Video parts carry already-sampled frames and their ``fps``
    (Qwen2.5-VL turns it into ``second_per_grid_ts``, Qwen3-VL into timestamps in the prompt).

    Args:
        pretrained: Hub id (e.g. ``Qwen/Qwen2.5-VL-3B-Instruct``), local directory, or
            ``tiny:qwen2_5_vl`` (also ``tiny:qwen2_vl``, ``tiny:qwen3_vl``), or a zoo checkpoint
            (see `PolicyModule`).
        min_pixels: Lower bound on pixels per image after the processor's resize; None keeps the
            processor's.
        max_pixels: Upper bound on pixels per image (the main memory knob); None keeps the
            processor's.
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    content_kinds = frozenset({"text", "image", "video"})
    tiny_checkpoints = ("tiny:qwen2_vl", "tiny:qwen2_5_vl", "tiny:qwen3_vl")
    shared_media = ("image", "video")

    def __init__(self, pretrained: str, min_pixels: int | None = None, max_pixels: int | None = None, **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self._video_kwargs = {}  # processor options for videos, per model type (set by `load`)

    def load(self, path: str):
        from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

        model_type = AutoConfig.from_pretrained(path).model_type
        if model_type not in FAMILIES:
            raise ValueError(f"{path} is a {model_type!r} model; QwenVLPolicy supports {FAMILIES}")
        processor = AutoProcessor.from_pretrained(path, **pixel_bounds(self.min_pixels, self.max_pixels))
        model = AutoModelForImageTextToText.from_pretrained(path, **self.load_kwargs())
        # Qwen3-VL: cap pixels per frame as the reference implementation (qwen-vl-utils) does
        self._video_kwargs = {"cap_pixels_per_frame": True} if model_type == "qwen3_vl" else {}
        return model, processor

    def encode(self, examples: list) -> PromptBatch:
        self.check_media(examples)
        parts, kwargs = vision_inputs(examples, **self._video_kwargs)
        texts = chat_texts(self.processor, examples)
        tensors = dict(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))
        check_vision_placeholders(self, tensors, PLACEHOLDERS)
        return PromptBatch(tensors=tensors, items={k: [len(p) for p in v] for k, v in parts.items()}, specs=MEDIA)

    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``vision`` (the vision tower without its mergers), ``aligner`` (the mergers), ``llm``."""
        return vision_groups(self.model.model.visual) | {"llm": [self.model.model.language_model, self.model.lm_head]}

    def packed_position_ids(self, model: nn.Module, inputs: dict) -> Tensor:
        """The text positions (restarting per row: what the mask code reads packing from) over each
        row's 3D rope ids as the row alone has them, ``[4, 1, total]``: the model's own
        ``get_rope_index`` over the padded rows skips each row's padding."""
        text = super().packed_position_ids(model, inputs)  # [1, total]
        real = inputs["attention_mask"].bool()  # [n, T]
        grids = ("image_grid_thw", "video_grid_thw", "second_per_grid_ts")
        rope, _ = model.model.get_rope_index(
            inputs["input_ids"],
            inputs["mm_token_type_ids"],
            attention_mask=inputs["attention_mask"],
            **{key: inputs[key] for key in grids if key in inputs},
        )  # [3, n, T]
        return torch.cat([text[None], rope[:, real][:, None]])  # [4, 1, total]


# ---- tiny random-init models (`zoo.tiny`)
# ----------------------------------------------------------
def tiny_vision_processors(patch: int = 14) -> dict:
    """The image and video processors of the tiny Qwen2 / Qwen2.5 vision towers (56-224 px a
    side)."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    bounds = dict(patch_size=patch, merge_size=2, min_pixels=56 * 56, max_pixels=224 * 224)
    return {"image_processor": Qwen2VLImageProcessor(**bounds), "video_processor": Qwen2VLVideoProcessor(**bounds)}


def _qwen2_vl():
    from transformers import Qwen2VLConfig, Qwen2VLProcessor

    tok = build_tokenizer()
    config = Qwen2VLConfig(
        text_config=text_config(tok),
        vision_config=dict(depth=2, embed_dim=64, hidden_size=64, mlp_ratio=2, num_heads=4, patch_size=14),
        **token_ids(tok),
    )
    return config, Qwen2VLProcessor(tokenizer=tok, chat_template=CHAT_TEMPLATE, **tiny_vision_processors())


def _qwen2_5_vl():
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLProcessor

    tok = build_tokenizer()
    config = Qwen2_5_VLConfig(
        text_config=text_config(tok),
        vision_config=dict(
            depth=2,
            hidden_size=64,
            intermediate_size=128,
            num_heads=4,
            out_hidden_size=64,
            fullatt_block_indexes=[1],
            window_size=112,
            patch_size=14,
        ),
        **token_ids(tok),
    )
    return config, Qwen2_5_VLProcessor(tokenizer=tok, chat_template=CHAT_TEMPLATE, **tiny_vision_processors())


def _qwen2_5_vl_3b(text_layers: int = 36, vision_blocks: int = 32):
    """Qwen2.5-VL-3B-Instruct's published shapes (and vocabulary rows) with random weights and the
    tiny tokenizer and processor: for speed and memory measurements on a GPU (`zoo speed --model
    tiny:qwen2_5_vl_3b`), not for training tests. Saved in bfloat16 (about 7.5 GB). Fewer
    ``text_layers`` / ``vision_blocks`` keep the widths (`zoo.tools.scale`); every 8th vision block
    attends fully, as in the 3B, else the last."""
    from transformers import Qwen2_5_VLConfig

    _, processor = _qwen2_5_vl()
    tok = processor.tokenizer
    text = dict(
        text_config(tok),
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=text_layers,
        num_attention_heads=16,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        vocab_size=151936,
        rope_parameters=dict(ROPE, mrope_section=[16, 24, 24]),
        tie_word_embeddings=True,
    )
    vision = dict(
        depth=vision_blocks,
        hidden_size=1280,
        intermediate_size=3420,
        num_heads=16,
        out_hidden_size=2048,
        fullatt_block_indexes=list(range(7, vision_blocks, 8)) or [vision_blocks - 1],
        window_size=112,
        patch_size=14,
    )
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **token_ids(tok))
    return config, processor


def _qwen3_vl():
    from transformers import Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLProcessor, Qwen3VLVideoProcessor

    tok = build_tokenizer()
    config = Qwen3VLConfig(
        text_config=text_config(tok, head_dim=16) | {"rope_parameters": dict(ROPE, mrope_interleaved=True)},
        vision_config=dict(
            depth=2,
            hidden_size=64,
            intermediate_size=128,
            num_heads=4,
            out_hidden_size=64,
            num_position_embeddings=256,
            deepstack_visual_indexes=[0],
            patch_size=16,
        ),
        **token_ids(tok),
    )
    image = Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=256 * 256)
    # Qwen3-VL bounds the pixels of a whole clip (frames x height x width), not of one frame
    video = Qwen3VLVideoProcessor(
        patch_size=16, merge_size=2, size={"shortest_edge": 64 * 64, "longest_edge": 16 * 256 * 256}
    )
    return config, Qwen3VLProcessor(
        image_processor=image, tokenizer=tok, video_processor=video, chat_template=CHAT_TEMPLATE
    )


TINY = {
    "qwen2_vl": Tiny(_qwen2_vl),
    "qwen2_5_vl": Tiny(_qwen2_5_vl),
    "qwen3_vl": Tiny(_qwen3_vl),
    "qwen2_5_vl_3b": Tiny(_qwen2_5_vl_3b, dtype=torch.bfloat16),
}
