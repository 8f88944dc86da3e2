"""Random-init tiny models with an offline byte-level tokenizer, saved as ordinary pretrained dirs: Qwen-VL,
Idefics3 / SmolVLM, Gemma 3, LLaVA-OneVision, Qwen2-Audio, the Qwen2.5-Omni thinker and a text-only Qwen2.

Tests and the quickstart load them through the same ``from_pretrained`` path as real checkpoints: pass
``pretrained: tiny:qwen2_5_vl`` (built once into a cache dir) or build one with
``python -m zoo.tiny qwen2_5_vl out_dir``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)
VOCAB_SIZE = 576  # > len(tokenizer) on purpose, like real checkpoints: unused rows must be suppressed

CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}"
    "{%- if c.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif c.type == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{%- elif c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=4096)
ROPE = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}  # sum = head_dim / 2


# Byte-level BPE trained on this text: prompts tokenize to realistic lengths (a few characters per token)
# while the vocabulary stays small enough for a random policy to stumble on short answers.
CORPUS = """
This image has been rotated counter-clockwise from upright. By how many degrees? Answer with the letter of the
correct option. Reply with the answer only. Put only the final answer inside <answer> </answer>. First reason
step by step inside <think> </think>. The image was cut into a grid and the pieces were shuffled. For each
position of the original image, in raster order (left to right, top to bottom), give the number of the piece
that belongs there, separated by commas. The video was split into clips which were shuffled. Give the clips in
chronological order. Which frames were changed? How many objects of each kind appear? Order the marked points
from closest to farthest from the camera. Which action led from the first screenshot to the second? Listen to
the audio and answer the question. What is in the picture? Describe the scene, the objects, their colors and
positions. Count the shapes: circles, squares, triangles.
"""
BPE_VOCAB = 500


def build_tokenizer(extra_tokens: tuple[str, ...] = (), named_tokens: dict[str, str] | None = None):
    """A byte-level BPE tokenizer (deterministic, trained on `CORPUS`) plus the Qwen-VL special tokens, then
    ``extra_tokens`` (another family's specials) and ``named_tokens`` (special tokens also set as tokenizer
    attributes, e.g. Gemma 3's ``boi_token`` or ``{"audio_token": "<|AUDIO|>"}``); with neither, the
    tokenizer of the Qwen-VL families is unchanged."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([CORPUS] * 10, trainer)
    model = json.loads(bpe.to_str())["model"]
    named = {"extra_special_tokens": named_tokens} if named_tokens else {}
    tok = Qwen2Tokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]],
                         eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="<|endoftext|>", **named)
    extra = tuple(dict.fromkeys((*extra_tokens, *(named_tokens or {}).values())))
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS + extra],
                   special_tokens=True)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _token_ids(tok) -> dict:
    ids = tok.convert_tokens_to_ids
    return dict(image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
                vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"))


def _text_config(tok, **extra) -> dict:
    eos, pad = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    return dict(TEXT, vocab_size=VOCAB_SIZE, eos_token_id=eos, pad_token_id=pad, bos_token_id=None,
                rope_parameters=ROPE, **extra)


def _qwen2_vl(tok):
    from transformers import Qwen2VLConfig, Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    config = Qwen2VLConfig(
        text_config=_text_config(tok),
        vision_config=dict(depth=2, embed_dim=64, hidden_size=64, mlp_ratio=2, num_heads=4, patch_size=14),
        **_token_ids(tok))
    image = Qwen2VLImageProcessor(patch_size=14, merge_size=2, min_pixels=56 * 56, max_pixels=224 * 224)
    video = Qwen2VLVideoProcessor(patch_size=14, merge_size=2, min_pixels=56 * 56, max_pixels=224 * 224)
    return config, Qwen2VLProcessor(image_processor=image, tokenizer=tok, video_processor=video,
                                    chat_template=CHAT_TEMPLATE)


def _qwen2_5_vl(tok):
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    config = Qwen2_5_VLConfig(
        text_config=_text_config(tok),
        vision_config=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=64,
                           fullatt_block_indexes=[1], window_size=112, patch_size=14),
        **_token_ids(tok))
    image = Qwen2VLImageProcessor(patch_size=14, merge_size=2, min_pixels=56 * 56, max_pixels=224 * 224)
    video = Qwen2VLVideoProcessor(patch_size=14, merge_size=2, min_pixels=56 * 56, max_pixels=224 * 224)
    return config, Qwen2_5_VLProcessor(image_processor=image, tokenizer=tok, video_processor=video,
                                       chat_template=CHAT_TEMPLATE)


def _qwen2_5_vl_3b(tok):
    """Qwen2.5-VL-3B-Instruct's published shapes (and vocabulary rows) with random weights and the tiny
    tokenizer and processor: for speed and memory measurements on a GPU (`zoo bench --model
    tiny:qwen2_5_vl_3b`), not for training tests. Saved in bfloat16 (about 7.5 GB)."""
    from transformers import Qwen2_5_VLConfig

    _, processor = _qwen2_5_vl(tok)
    text = dict(_text_config(tok), hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                num_attention_heads=16, num_key_value_heads=2, max_position_embeddings=32768, vocab_size=151936,
                rope_parameters=dict(ROPE, mrope_section=[16, 24, 24]), tie_word_embeddings=True)
    vision = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048,
                  fullatt_block_indexes=[7, 15, 23, 31], window_size=112, patch_size=14)
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **_token_ids(tok))
    return config, processor


def _qwen3_vl(tok):
    from transformers import Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLProcessor, Qwen3VLVideoProcessor

    rope = dict(ROPE, mrope_interleaved=True)
    config = Qwen3VLConfig(
        text_config=_text_config(tok, head_dim=16) | {"rope_parameters": rope},
        vision_config=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=64,
                           num_position_embeddings=256, deepstack_visual_indexes=[0], patch_size=16),
        **_token_ids(tok))
    image = Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=256 * 256)
    # Qwen3-VL bounds the pixels of a whole clip (frames x height x width), not of one frame
    video = Qwen3VLVideoProcessor(patch_size=16, merge_size=2,
                                  size={"shortest_edge": 64 * 64, "longest_edge": 16 * 256 * 256})
    return config, Qwen3VLProcessor(image_processor=image, tokenizer=tok, video_processor=video,
                                    chat_template=CHAT_TEMPLATE)


AUDIO_TOKENS = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"}
OMNI_TOKENS = AUDIO_TOKENS | {"image_token": "<|IMAGE|>", "video_token": "<|VIDEO|>",
                              "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>"}
AUDIO_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(  # Qwen2-Audio numbers the clips of a conversation
    "{%- if c.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif c.type == 'video' %}<|vision_start|><|video_pad|><|vision_end|>",
    "{%- if c.type == 'audio' %}{% set ns.audios = ns.audios + 1 %}"
    "Audio {{ ns.audios }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n").replace(
    "{%- for m in messages -%}", "{%- set ns = namespace(audios=0) -%}{%- for m in messages -%}")
OMNI_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(
    "{%- if c.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif c.type == 'video' %}<|vision_start|><|video_pad|><|vision_end|>",
    "{%- if c.type == 'image' %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{%- elif c.type == 'video' %}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{%- elif c.type == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>")
# Qwen2-Audio's encoder always sees a whole padded window of mel frames (30 s, 1500 positions, in the real
# models) for every clip, whatever its length: the tiny models use a 4 s window and a very small encoder
AUDIO_WINDOW_SECONDS = 4
AUDIO_ENCODER = dict(num_mel_bins=128, max_source_positions=AUDIO_WINDOW_SECONDS * 50, d_model=32,
                     encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=64)


def _whisper_features():
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, chunk_length=AUDIO_WINDOW_SECONDS)


def _qwen2_audio(tok):
    from transformers import Qwen2AudioConfig, Qwen2AudioProcessor

    text = _text_config(tok, model_type="qwen2") | {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    config = Qwen2AudioConfig(audio_config=dict(AUDIO_ENCODER, model_type="qwen2_audio_encoder"), text_config=text,
                              audio_token_id=tok.convert_tokens_to_ids("<|AUDIO|>"))
    return config, Qwen2AudioProcessor(feature_extractor=_whisper_features(), tokenizer=tok,
                                       chat_template=AUDIO_CHAT_TEMPLATE)


def _qwen2_5_omni(tok):
    from transformers import (
        Qwen2_5OmniProcessor,
        Qwen2_5OmniThinkerConfig,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    ids = tok.convert_tokens_to_ids
    config = Qwen2_5OmniThinkerConfig(
        audio_config=dict(AUDIO_ENCODER, n_window=50, output_dim=TEXT["hidden_size"]),
        vision_config=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4,
                           out_hidden_size=TEXT["hidden_size"], fullatt_block_indexes=[1], window_size=112,
                           patch_size=14),
        text_config=_text_config(tok),
        audio_token_index=ids("<|AUDIO|>"), image_token_index=ids("<|IMAGE|>"), video_token_index=ids("<|VIDEO|>"),
        audio_start_token_id=ids("<|audio_bos|>"), audio_end_token_id=ids("<|audio_eos|>"),
        vision_start_token_id=ids("<|vision_bos|>"), vision_end_token_id=ids("<|vision_eos|>"),
        user_token_id=tok.encode("user")[0])
    image = Qwen2VLImageProcessor(patch_size=14, merge_size=2, min_pixels=56 * 56, max_pixels=224 * 224)
    video = Qwen2VLVideoProcessor(patch_size=14, merge_size=2, min_pixels=56 * 56, max_pixels=224 * 224)
    return config, Qwen2_5OmniProcessor(image_processor=image, video_processor=video,
                                        feature_extractor=_whisper_features(), tokenizer=tok,
                                        chat_template=OMNI_CHAT_TEMPLATE)



def _qwen2(tok):
    """A text-only Qwen2 causal LM (the language model of point-cloud and timm-encoder policies)."""
    from transformers import Qwen2Config

    rope = {"rope_type": "default", "rope_theta": 1e6}
    return Qwen2Config(**_text_config(tok) | {"rope_parameters": rope}), tok



# Idefics3 / SmolVLM: each image becomes crops of 32 px (a row-by-column grid plus a global view), each crop
# 16 patches pixel-shuffled into 4 <image> tokens; the template writes one <image> per image, as SmolVLM's does.
IDEFICS3_TOKENS = ("<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>",
                   *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)))
IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for m in messages %}{{ m.role | capitalize }}:"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}"
    "{%- if c.type == 'image' %}<image>{% elif c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)
# Gemma 3: a fixed 32 px image, 16 patches average-pooled into 4 <image_soft_token>s; the template writes
# <start_of_image>, which the processor expands to <start_of_image> + soft tokens + <end_of_image>.
GEMMA3_TOKENS = ("<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<image_soft_token>", "<end_of_image>")
GEMMA3_TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}"
    "{%- if c.type == 'image' %}<start_of_image>{% elif c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}"
    "{% endif %}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
VISION = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=32,
              patch_size=8)


def _idefics3(_):
    from transformers import Idefics3Config, Idefics3ImageProcessor, Idefics3Processor

    tok = build_tokenizer(IDEFICS3_TOKENS)
    tok.eos_token = "<end_of_utterance>"
    eos, pad, image = tok.convert_tokens_to_ids(["<end_of_utterance>", "<|endoftext|>", "<image>"])
    config = Idefics3Config(text_config=dict(TEXT, model_type="llama", vocab_size=VOCAB_SIZE, head_dim=16,
                                             eos_token_id=eos, pad_token_id=pad, bos_token_id=None),
                            vision_config=VISION, scale_factor=2, image_token_id=image, pad_token_id=pad)
    image_processor = Idefics3ImageProcessor(size={"longest_edge": 64}, max_image_size={"longest_edge": 32})
    return config, Idefics3Processor(image_processor=image_processor, tokenizer=tok, image_seq_len=4,
                                     chat_template=IDEFICS3_TEMPLATE)


def _gemma3(_):
    from transformers import Gemma3Config, Gemma3ImageProcessor, Gemma3Processor

    tok = build_tokenizer(GEMMA3_TOKENS, {"boi_token": "<start_of_image>", "image_token": "<image_soft_token>",
                                          "eoi_token": "<end_of_image>"})
    tok.eos_token = "<end_of_turn>"
    ids = tok.convert_tokens_to_ids
    config = Gemma3Config(
        text_config=dict(TEXT, vocab_size=VOCAB_SIZE, head_dim=16, sliding_window=64, eos_token_id=ids("<end_of_turn>"),
                         pad_token_id=ids("<|endoftext|>"), bos_token_id=None,
                         layer_types=["sliding_attention", "full_attention"]),
        vision_config=VISION, mm_tokens_per_image=4, boi_token_index=ids("<start_of_image>"),
        eoi_token_index=ids("<end_of_image>"), image_token_index=ids("<image_soft_token>"))
    image_processor = Gemma3ImageProcessor(size={"height": 32, "width": 32})
    return config, Gemma3Processor(image_processor=image_processor, tokenizer=tok, image_seq_length=4,
                                   chat_template=GEMMA3_TEMPLATE)


def _llava_onevision(_):
    """Anyres tiling: an image alone in its prompt becomes a 32 px base tile plus a grid of 32 px tiles (up to
    2x2), 16 <image> tokens each before unpadding; in a multi-image prompt, only the base tile."""
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
        text_config=dict(_text_config(tok), model_type="qwen2", rope_parameters={"rope_type": "default",
                                                                                 "rope_theta": 1e6}),
        vision_config=dict(VISION, model_type="siglip_vision_model"), image_token_index=ids("<image>"),
        video_token_index=ids("<video>"), image_grid_pinpoints=pinpoints, vision_feature_select_strategy="full")
    image = LlavaOnevisionImageProcessor(size={"height": 32, "width": 32}, image_grid_pinpoints=pinpoints)
    video = LlavaOnevisionVideoProcessor(size={"height": 32, "width": 32})
    template = CHAT_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<image>").replace(
        "<|vision_start|><|video_pad|><|vision_end|>", "<video>")
    return config, LlavaOnevisionProcessor(image_processor=image, video_processor=video, tokenizer=tok,
                                           num_image_tokens=16, vision_feature_select_strategy="full",
                                           chat_template=template)


FAMILIES = {"qwen2_vl": _qwen2_vl, "qwen2_5_vl": _qwen2_5_vl, "qwen2_5_vl_3b": _qwen2_5_vl_3b, "qwen3_vl": _qwen3_vl,
            "idefics3": _idefics3, "gemma3": _gemma3, "llava_onevision": _llava_onevision, "qwen2": _qwen2,
            "qwen2_audio": _qwen2_audio, "qwen2_5_omni": _qwen2_5_omni}
#: Tiny bases that are trained, not random: the module that builds and caches each (its ``resolve()``).
TRAINED = {"qwen2_5_vl_perception": "zoo.perception_base"}
NAMED_TOKENS = {"qwen2_audio": AUDIO_TOKENS, "qwen2_5_omni": OMNI_TOKENS}


def _gemma3_init(model) -> None:
    """Gemma 3 zero-initialises its projector, which would hide the images from a random-init model."""
    torch.nn.init.normal_(model.model.multi_modal_projector.mm_input_projection_weight, std=0.02)


INIT = {"gemma3": _gemma3_init}  # families whose random init needs a fix-up after ``from_config``
SAVE_DTYPES = {"qwen2_5_vl_3b": torch.bfloat16}  # families saved in another dtype than float32


def build(family: str, out_dir: str | os.PathLike, seed: int = 0) -> Path:
    """Build a random-init tiny model of ``family`` and save model + processor to ``out_dir``."""
    from transformers import AutoModelForCausalLM, AutoModelForMultimodalLM

    if family not in FAMILIES:
        raise ValueError(f"unknown tiny family {family!r}; choose one of {sorted(FAMILIES)}")
    config, processor = FAMILIES[family](build_tokenizer(named_tokens=NAMED_TOKENS.get(family)))
    torch.manual_seed(seed)
    # multimodal models (image-text-to-text and the audio ones) or a plain causal LM
    auto = AutoModelForCausalLM if config.get_text_config() is config else AutoModelForMultimodalLM
    model = auto.from_config(config, dtype=SAVE_DTYPES.get(family, torch.float32))
    if family in INIT:
        INIT[family](model)
    model.generation_config.eos_token_id = config.get_text_config().eos_token_id
    model.generation_config.pad_token_id = config.get_text_config().pad_token_id
    out = Path(out_dir)
    # every rank of a process group may be the one whose build gets published (see `resolve`), but
    # save_pretrained writes nothing on ranks other than 0: this model is saved wherever it was built
    model.should_save_on_this_rank = lambda is_main_process: True
    model.save_pretrained(out)
    processor.save_pretrained(out)
    if not (out / "config.json").exists():
        raise RuntimeError(f"building tiny:{family} wrote no config.json into {out}")
    return out


def cache_dir() -> Path:
    return Path(os.environ.get("ZOO_CACHE", Path.home() / ".cache" / "zoo")) / "tiny"


def resolve(pretrained: str) -> str:
    """Map ``tiny:<family>`` to a cached local directory (built on first use); return anything else as is."""
    if not pretrained.startswith("tiny:"):
        return pretrained
    family = pretrained.removeprefix("tiny:")
    if family in TRAINED:  # a base trained from a tiny model, cached under a key of its own
        return importlib.import_module(TRAINED[family]).resolve()
    version = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()[:10]  # any edit here rebuilds
    target = cache_dir() / f"{family}-{version}"
    if not (target / "config.json").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{family}-"))
        build(family, tmp)
        try:  # atomic publish: concurrent builders (DDP ranks) race safely
            tmp.rename(target)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build a random-init tiny model as a pretrained directory.")
    parser.add_argument("family", choices=sorted(FAMILIES))
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build(args.family, args.out_dir, args.seed))


if __name__ == "__main__":
    main()
