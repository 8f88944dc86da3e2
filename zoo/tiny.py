"""Random-init tiny models with an offline byte-level tokenizer, saved as ordinary pretrained dirs.

Tests and the quickstart load them through the same ``from_pretrained`` path as real checkpoints:
pass ``pretrained: tiny:qwen2_5_vl`` (built once into a cache dir) or build one with ``python -m
zoo.tiny qwen2_5_vl out_dir``. Each policy family file lists its own tiny models in a ``TINY`` table
of `Tiny` entries (``zoo/qwen_vl.py``: ``tiny:qwen2_vl``, ``tiny:qwen2_5_vl``, ...); `families`
collects them. This module holds what they share: the tokenizer, the chat template, the text-model
sizes.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from zoo.cache import build_once, cache_root

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
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

TEXT = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=4096,
)
ROPE = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}  # sum = head_dim / 2


# Byte-level BPE trained on this text: prompts tokenize to realistic lengths (a few characters per
# token) while the vocabulary stays small enough for a random policy to stumble on short answers.
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
    """A byte-level BPE tokenizer (deterministic, trained on `CORPUS`) plus the Qwen-VL special
    tokens, then ``extra_tokens`` (another family's specials) and ``named_tokens`` (special tokens
    also set as tokenizer attributes, e.g. Gemma 3's ``boi_token`` or ``{"audio_token":
    "<|AUDIO|>"}``); with neither, the tokenizer of the Qwen-VL families is unchanged."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([CORPUS] * 10, trainer)
    model = json.loads(bpe.to_str())["model"]
    named = {"extra_special_tokens": named_tokens} if named_tokens else {}
    tok = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=[tuple(m) for m in model["merges"]],
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        **named,
    )
    extra = tuple(dict.fromkeys((*extra_tokens, *(named_tokens or {}).values())))
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS + extra], special_tokens=True)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def token_ids(tok) -> dict:
    """The Qwen-VL media token ids of ``tok``, as the Qwen-VL configs name them."""
    ids = tok.convert_tokens_to_ids
    return dict(
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )


def text_config(tok, **extra) -> dict:
    """The tiny language model's config (`TEXT` sizes, M-RoPE) with ``tok``'s EOS and pad ids."""
    eos, pad = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    return dict(
        TEXT,
        vocab_size=VOCAB_SIZE,
        eos_token_id=eos,
        pad_token_id=pad,
        bos_token_id=None,
        rope_parameters=ROPE,
        **extra,
    )


@dataclass(frozen=True)
class Tiny:
    """One ``tiny:<family>`` model, listed in the ``TINY`` table of its policy family's file.

    Args:
        make: Returns ``(config, processor)`` of the model; the processor (or tokenizer) is offline,
            built on `build_tokenizer`.
        init: Fixes up the random weights after ``from_config`` (a family that zero-initialises a
            part the tiny model needs), or None.
        dtype: The dtype the weights are saved in.
    """

    make: Callable[[], tuple]
    init: Callable[[torch.nn.Module], None] | None = None
    dtype: torch.dtype = torch.float32


def families() -> dict[str, Tiny]:
    """Every ``tiny:<family>``: the ``TINY`` tables of the zoo modules (the `zoo` package imports
    them all)."""
    import zoo  # noqa: F401  (imports every family file)

    found: dict[str, Tiny] = {}
    where: dict[str, str] = {}
    for module in _family_modules():
        for name, spec in module.TINY.items():
            if name in found:
                raise ValueError(f"tiny:{name} is defined twice: in {where[name]} and {module.__name__}")
            found[name], where[name] = spec, module.__name__
    return found


def _family_modules() -> list:
    return [
        module
        for name, module in sorted(sys.modules.items())
        if name.startswith("zoo.") and isinstance(getattr(module, "TINY", None), dict)
    ]


def version() -> str:
    """A hash of this file and of every file holding a ``TINY`` table: any edit to a builder
    rebuilds."""
    families()
    digest = hashlib.sha1(Path(__file__).read_bytes())
    for module in _family_modules():
        digest.update(Path(inspect.getfile(module)).read_bytes())
    return digest.hexdigest()[:10]


@dataclass(frozen=True)
class Trained:
    """A tiny base that is trained, not random: built by a zoo command, cached under a key of its
    recipe, and only ever loaded here (loading a model never trains one).

    Args:
        steps: Training steps of the recipe.
        batch: Batch size of the recipe.
        lr: Learning rate of the recipe.
        inputs: The files whose contents decide the weights (paths from the repository root),
            besides the tiny models' own builders (`version`).
        command: What a user runs to build it.
    """

    steps: int
    batch: int
    lr: float
    inputs: tuple[str, ...]
    command: str


#: ``tiny:qwen2_5_vl_perception``: the tiny Qwen2.5-VL after SFT on zoo's synthetic perception
#: questions. 2e-3 (the first recipe) left every kind at its answer prior: the loss sat at the
#: prior's from step 50 on (counting alone, 300 steps); at 1e-3 one kind alone leaves the prior
#: after 200-400 steps.
TRAINED = {
    "qwen2_5_vl_perception": Trained(
        steps=2400,
        batch=16,
        lr=1e-3,
        inputs=(
            "zoo/tools/perception_base.py",
            "zoo/sft/strategy.py",
            "zoo/sft/functional.py",
            "zoo/sft/demonstrations.py",
            "zoo/training.py",
            "datamodules/sources/synthetic_questions.py",
            "datamodules/sources/shapes.py",
            "datamodules/sources/synthetic_rgbd.py",
            "tasks/mcq.py",
            "tasks/answers.py",
        ),
        command="zoo build-base",
    ),
}


def trained_key(family: str, steps: int, batch: int, lr: float) -> str:
    """The cache key of a trained base: its recipe and every input of its build; a change to any of
    them names a new base."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1(f"{steps} {batch} {lr} {version()}".encode())
    for name in TRAINED[family].inputs:
        digest.update((root / name).read_bytes())
    return digest.hexdigest()[:10]


def trained_dir(family: str, steps: int, batch: int, lr: float) -> Path:
    """Where the base of ``family`` built with this recipe is cached."""
    return cache_dir() / f"{family}-{trained_key(family, steps, batch, lr)}"


def _cached_base(family: str) -> str:
    """The cached trained base of ``family``, or a one-line error that says how to build it."""
    spec = TRAINED[family]
    target = trained_dir(family, spec.steps, spec.batch, spec.lr)
    if not (target / "config.json").exists():
        raise FileNotFoundError(
            f"tiny:{family} is trained, not random, and is not built yet (or its recipe "
            f"changed): build it once with `{spec.command}` (a few CPU minutes)"
        )
    return str(target)


def build(family: str, out_dir: str | os.PathLike, seed: int = 0) -> Path:
    """Build a random-init tiny model of ``family`` and save model + processor to ``out_dir``."""
    from transformers import AutoModelForCausalLM, AutoModelForMultimodalLM

    known = families()
    if family not in known:
        from zoo.preflight import check_not_shadowed

        check_not_shadowed()  # an empty list of families: a zoo/ folder shadowing the package
        raise ValueError(f"unknown tiny family {family!r}; choose one of {sorted(known)}")
    spec = known[family]
    config, processor = spec.make()
    torch.manual_seed(seed)
    # multimodal models (image-text-to-text and the audio ones) or a plain causal LM
    auto = AutoModelForCausalLM if config.get_text_config() is config else AutoModelForMultimodalLM
    model = auto.from_config(config, dtype=spec.dtype)
    if spec.init is not None:
        spec.init(model)
    model.generation_config.eos_token_id = config.get_text_config().eos_token_id
    model.generation_config.pad_token_id = config.get_text_config().pad_token_id
    out = Path(out_dir)
    # every rank of a process group may be the one whose build gets published (see `resolve`), but
    # save_pretrained writes nothing on ranks other than 0: this model is saved wherever it was
    # built
    model.should_save_on_this_rank = lambda is_main_process: True
    model.save_pretrained(out)
    processor.save_pretrained(out)
    if not (out / "config.json").exists():
        raise RuntimeError(f"building tiny:{family} wrote no config.json into {out}")
    return out


def cache_dir() -> Path:
    """Where `resolve` keeps built tiny models: ``$ZOO_CACHE/tiny``, by default
    ``~/.cache/zoo/tiny``."""
    return cache_root() / "tiny"


def resolve(pretrained: str) -> str:
    """Map ``tiny:<family>`` to a cached local directory (a random-init one built on first use, a
    trained base only loaded); return anything else as is."""
    if not pretrained.startswith("tiny:"):
        return pretrained
    family = pretrained.removeprefix("tiny:")
    if family in TRAINED:
        return _cached_base(family)
    return str(build_once(cache_dir() / f"{family}-{version()}", lambda folder: build(family, folder)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build a random-init tiny model as a pretrained directory.")
    parser.add_argument("family", choices=sorted(families()))
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build(args.family, args.out_dir, args.seed))


if __name__ == "__main__":
    main()
