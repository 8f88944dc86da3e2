"""Qwen2-Audio as a GRPO policy (R1-AQA's base model), through the transformers Auto classes."""

from __future__ import annotations

from torch import nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.media import audio_input, chat_texts, check_placeholders, media_parts
from zoo.policy import PolicyModule
from zoo.tiny import CHAT_TEMPLATE, Tiny, build_tokenizer, text_config

#: Whisper features of every clip are padded to 30 s: one row of each per audio item.
AUDIO = MediaSpec(per_item=("input_features", "feature_attention_mask"))


def encode_audio(policy: PolicyModule, examples: list) -> tuple[list[list[dict]], dict]:
    """The audio parts of each example and the processor keyword arguments for them (none without
    audio)."""
    parts = [media_parts(ex, "audio") for ex in examples]
    rate = policy.processor.feature_extractor.sampling_rate
    waves = [audio_input(p, rate) for per in parts for p in per]
    return parts, (dict(audio=waves, sampling_rate=rate) if waves else {})


def check_audio_placeholders(policy: PolicyModule, tensors: dict, token: str) -> None:
    """As many ``token`` in the prompts as the audio encoder outputs for the clips' unpadded
    features."""
    expected = 0
    if "feature_attention_mask" in tensors:
        lengths = tensors["feature_attention_mask"].sum(-1)
        expected = int(policy.model.model.audio_tower._get_feat_extract_output_lengths(lengths)[1].sum())
    check_placeholders(tensors["input_ids"], policy.tokenizer.convert_tokens_to_ids(token), token, "audio", expected)


class QwenAudioPolicy(PolicyModule):
    """A Qwen2-Audio policy: text and audio clips (several per prompt, any number per row of a
    batch). Audio parts are resampled to the feature extractor's rate (16 kHz) when they come at
    another.

    Args:
        pretrained: Hub id (e.g. ``Qwen/Qwen2-Audio-7B-Instruct``), local directory,
            ``tiny:qwen2_audio``, or a zoo checkpoint (see `PolicyModule`).
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    content_kinds = frozenset({"text", "audio"})
    tiny_checkpoints = ("tiny:qwen2_audio",)

    def load(self, path: str):
        from transformers import AutoConfig, AutoModelForMultimodalLM, AutoProcessor

        model_type = AutoConfig.from_pretrained(path).model_type
        if model_type != "qwen2_audio":
            raise ValueError(f"{path} is a {model_type!r} model; QwenAudioPolicy supports 'qwen2_audio'")
        return AutoModelForMultimodalLM.from_pretrained(path, **self.load_kwargs()), AutoProcessor.from_pretrained(path)

    def encode(self, examples: list) -> PromptBatch:
        self.check_media(examples)
        texts = chat_texts(self.processor, examples)
        parts, kwargs = encode_audio(self, examples)
        tensors = dict(self.processor(text=texts, padding=True, return_tensors="pt", **kwargs))
        check_audio_placeholders(self, tensors, self.processor.audio_token)
        return PromptBatch(tensors=tensors, items={"audio": [len(p) for p in parts]}, specs={"audio": AUDIO})

    def module_groups(self) -> dict[str, list[nn.Module]]:
        """``audio`` (the audio encoder), ``aligner`` (the projector into the LM), ``llm``."""
        inner = self.model.model
        return {
            "audio": [inner.audio_tower],
            "aligner": [inner.multi_modal_projector],
            "llm": [inner.language_model, self.model.lm_head],
        }


# ---- tiny random-init models (`zoo.tiny`)
# ----------------------------------------------------------
AUDIO_TOKENS = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"}
AUDIO_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(  # Qwen2-Audio numbers the clips of a conversation
    "{%- if c.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif c.type == 'video' %}<|vision_start|><|video_pad|><|vision_end|>",
    "{%- if c.type == 'audio' %}{% set ns.audios = ns.audios + 1 %}"
    "Audio {{ ns.audios }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n",
).replace("{%- for m in messages -%}", "{%- set ns = namespace(audios=0) -%}{%- for m in messages -%}")
# Qwen2-Audio's encoder always sees a whole padded window of mel frames (30 s, 1500 positions, in
# the real models) for every clip, whatever its length: the tiny models use a 4 s window and a very
# small encoder
AUDIO_WINDOW_SECONDS = 4
AUDIO_ENCODER = dict(
    num_mel_bins=128,
    max_source_positions=AUDIO_WINDOW_SECONDS * 50,
    d_model=32,
    encoder_layers=1,
    encoder_attention_heads=2,
    encoder_ffn_dim=64,
)


def whisper_features():
    """The tiny models' Whisper feature extractor: 128 mel bins at 16 kHz over
    `AUDIO_WINDOW_SECONDS`."""
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, chunk_length=AUDIO_WINDOW_SECONDS)


def _qwen2_audio():
    from transformers import Qwen2AudioConfig, Qwen2AudioProcessor

    tok = build_tokenizer(named_tokens=AUDIO_TOKENS)
    text = text_config(tok, model_type="qwen2") | {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    config = Qwen2AudioConfig(
        audio_config=dict(AUDIO_ENCODER, model_type="qwen2_audio_encoder"),
        text_config=text,
        audio_token_id=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )
    return config, Qwen2AudioProcessor(
        feature_extractor=whisper_features(), tokenizer=tok, chat_template=AUDIO_CHAT_TEMPLATE
    )


TINY = {"qwen2_audio": Tiny(_qwen2_audio)}
