"""The Qwen2.5-Omni thinker (text output only) as a GRPO policy: audio, images and videos in one
prompt.

Images and videos go through the Qwen-VL handling of `zoo.qwen_vl`, audio through that of
`zoo.qwen_audio`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.media import chat_texts
from zoo.policy import PolicyModule
from zoo.qwen_audio import AUDIO, AUDIO_ENCODER, AUDIO_TOKENS, check_audio_placeholders, encode_audio, whisper_features
from zoo.qwen_vl import (
    IMAGE,
    check_vision_placeholders,
    pixel_bounds,
    tiny_vision_processors,
    vision_groups,
    vision_inputs,
)
from zoo.tiny import CHAT_TEMPLATE, TEXT, Tiny, build_tokenizer, text_config

MEDIA = {
    "image": IMAGE,
    "audio": AUDIO,
    "video": MediaSpec(
        per_item=("video_grid_thw", "video_second_per_grid"), flat="pixel_values_videos", grid="video_grid_thw"
    ),
}


class QwenOmniPolicy(PolicyModule):
    """The thinker of Qwen2.5-Omni: text, audio clips, images and videos, several per prompt, mixed
    in one batch. Loads only the thinker (no talker, no speech output). Video parts carry
    already-sampled frames and their ``fps``; audio parts are resampled to 16 kHz when they come at
    another rate.

    Args:
        pretrained: Hub id (e.g. ``Qwen/Qwen2.5-Omni-7B``), local directory, ``tiny:qwen2_5_omni``,
            or a zoo checkpoint (see `PolicyModule`).
        min_pixels: Lower bound on pixels per image after the processor's resize; None keeps the
            processor's.
        max_pixels: Upper bound on pixels per image (the main memory knob); None keeps the
            processor's.
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    content_kinds = frozenset({"text", "audio", "image", "video"})
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
        processor = AutoProcessor.from_pretrained(path, **pixel_bounds(self.min_pixels, self.max_pixels))
        if model_type == "qwen2_5_omni":  # a full checkpoint: built without the talker, only the thinker kept
            full = Qwen2_5OmniForConditionalGeneration.from_pretrained(
                path, enable_audio_output=False, **self.load_kwargs()
            )
            model = full.thinker
        else:  # a thinker on its own (the tiny model, or one this policy exported)
            model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path, **self.load_kwargs())
        # an embedding no forward pass uses: it would never get a gradient (DDP and optimizers
        # object)
        model.model.audio_tower.audio_bos_eos_token.requires_grad_(False)
        return model, processor

    def encode(self, examples: list) -> PromptBatch:
        self.check_media(examples)
        parts, kwargs = vision_inputs(examples)
        parts["audio"], audio_kwargs = encode_audio(self, examples)
        texts = chat_texts(self.processor, examples)
        tensors = dict(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs, **audio_kwargs))
        if "video_metadata" in kwargs:  # the processor assumes one frame rate for all videos: use each video's own
            step = self.processor.video_processor.temporal_patch_size
            tensors["video_second_per_grid"] = torch.tensor([step / m["fps"] for m in kwargs["video_metadata"]])
        check_vision_placeholders(
            self, tensors, {kind: getattr(self.processor, f"{kind}_token") for kind in ("image", "video")}
        )
        check_audio_placeholders(self, tensors, self.processor.audio_token)
        return PromptBatch(tensors=tensors, items={k: [len(p) for p in v] for k, v in parts.items()}, specs=MEDIA)

    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``audio`` (the audio encoder), ``vision`` (the vision tower without its merger),
        ``aligner`` (the vision merger), ``llm``."""
        inner = self.model.model
        return {
            "audio": [inner.audio_tower],
            **vision_groups(inner.visual),
            "llm": [inner.language_model, self.model.lm_head],
        }

    def packed_position_ids(self, model: nn.Module, inputs: dict) -> Tensor:
        """The text positions (restarting per row) over each row's 3D rope ids as the row alone
        has them (images, videos and audio: the thinker's own ``get_rope_index`` over the padded
        rows), ``[4, 1, total]``."""
        text = super().packed_position_ids(model, inputs)  # [1, total]
        audio = inputs.get("feature_attention_mask")
        rope, _ = model.model.get_rope_index(
            inputs["input_ids"],
            inputs.get("image_grid_thw"),
            inputs.get("video_grid_thw"),
            inputs["attention_mask"],
            bool(inputs.get("use_audio_in_video", False)),
            None if audio is None else audio.sum(-1),
            inputs.get("video_second_per_grid"),
        )  # [3, n, T]
        return torch.cat([text[None], rope[:, inputs["attention_mask"].bool()][:, None]])  # [4, 1, total]


# ---- tiny random-init models (`zoo.tiny`)
# ----------------------------------------------------------
OMNI_TOKENS = AUDIO_TOKENS | {
    "image_token": "<|IMAGE|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
}
OMNI_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(
    "{%- if c.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif c.type == 'video' %}<|vision_start|><|video_pad|><|vision_end|>",
    "{%- if c.type == 'image' %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{%- elif c.type == 'video' %}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{%- elif c.type == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>",
)


def _qwen2_5_omni():
    from transformers import Qwen2_5OmniProcessor, Qwen2_5OmniThinkerConfig

    tok = build_tokenizer(named_tokens=OMNI_TOKENS)
    ids = tok.convert_tokens_to_ids
    config = Qwen2_5OmniThinkerConfig(
        audio_config=dict(AUDIO_ENCODER, n_window=50, output_dim=TEXT["hidden_size"]),
        vision_config=dict(
            depth=2,
            hidden_size=64,
            intermediate_size=128,
            num_heads=4,
            out_hidden_size=TEXT["hidden_size"],
            fullatt_block_indexes=[1],
            window_size=112,
            patch_size=14,
        ),
        text_config=text_config(tok),
        audio_token_index=ids("<|AUDIO|>"),
        image_token_index=ids("<|IMAGE|>"),
        video_token_index=ids("<|VIDEO|>"),
        audio_start_token_id=ids("<|audio_bos|>"),
        audio_end_token_id=ids("<|audio_eos|>"),
        vision_start_token_id=ids("<|vision_bos|>"),
        vision_end_token_id=ids("<|vision_eos|>"),
        user_token_id=tok.encode("user")[0],
    )
    return config, Qwen2_5OmniProcessor(
        feature_extractor=whisper_features(),
        tokenizer=tok,
        chat_template=OMNI_CHAT_TEMPLATE,
        **tiny_vision_processors(),
    )


TINY = {"qwen2_5_omni": Tiny(_qwen2_5_omni)}
