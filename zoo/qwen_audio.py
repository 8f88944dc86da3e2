"""Qwen2-Audio as a GRPO policy (R1-AQA's base model), through the transformers Auto classes."""

from __future__ import annotations

from torch import nn

from zoo.batch import MediaSpec, PromptBatch
from zoo.media import audio_input, chat_texts, check_placeholders, media_parts
from zoo.policy import PolicyModule

#: Whisper features of every clip are padded to 30 s: one row of each per audio item.
AUDIO = MediaSpec(per_item=("input_features", "feature_attention_mask"))


def encode_audio(policy: PolicyModule, examples: list) -> tuple[list[list[dict]], dict]:
    """The audio parts of each example and the processor keyword arguments for them (none without audio)."""
    parts = [media_parts(ex, "audio") for ex in examples]
    rate = policy.processor.feature_extractor.sampling_rate
    waves = [audio_input(p, rate) for per in parts for p in per]
    return parts, (dict(audio=waves, sampling_rate=rate) if waves else {})


def check_audio_placeholders(policy: PolicyModule, tensors: dict, token: str) -> None:
    """As many ``token`` in the prompts as the audio encoder outputs for the clips' unpadded features."""
    expected = 0
    if "feature_attention_mask" in tensors:
        lengths = tensors["feature_attention_mask"].sum(-1)
        expected = int(policy.model.model.audio_tower._get_feat_extract_output_lengths(lengths)[1].sum())
    check_placeholders(tensors["input_ids"], policy.tokenizer.convert_tokens_to_ids(token), token, "audio", expected)


class QwenAudioPolicy(PolicyModule):
    """A Qwen2-Audio policy: text and audio clips (several per prompt, any number per row of a batch). Audio
    parts are resampled to the feature extractor's rate (16 kHz) when they come at another.

    Args:
        pretrained: Hub id (e.g. ``Qwen/Qwen2-Audio-7B-Instruct``), local directory, ``tiny:qwen2_audio``,
            or a zoo checkpoint (see `PolicyModule`).
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    modalities = frozenset({"text", "audio"})
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
        return {"audio": [inner.audio_tower], "aligner": [inner.multi_modal_projector],
                "llm": [inner.language_model, self.model.lm_head]}

