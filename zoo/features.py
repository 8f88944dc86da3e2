"""Each prompt's media encoded once per scoring forward, its features shared by the prompt's G
completions.

The rows of a micro-batch that come from one prompt carry copies of the same images and videos;
encoding every copy repeats the vision tower's work G times. `encoded_once` makes a Hugging Face
model encode the media of the distinct prompts only and hands the language model each row's features
by indexing them (its ``mm_encoder_outputs`` input), so every row's gradient flows back into the one
encoder pass.

The features are computed inside the model's own forward (a forward pre-hook on its inner model), so
the encoder runs where it always does: under FSDP2 the root's parameters are gathered, under DDP the
pass is part of the wrapped step.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from zoo.batch import PromptBatch


def item_index(counts: list[int], prompts: list[int], prompt_of_row: list[int]) -> list[int]:
    """For each row in order, the positions of its prompt's items among the items of ``prompts``
    (each distinct prompt once, in that order), e.g. counts ``[1, 2]``, prompts ``[1, 0]``, rows of
    prompts ``[1, 1, 0]`` -> ``[0, 1, 0, 1, 2]``."""
    starts = {}
    first = 0
    for prompt in prompts:
        starts[prompt], first = first, first + counts[prompt]
    return [starts[p] + k for p in prompt_of_row for k in range(counts[p])]


def repeat_items(output, index: list[int]):
    """Per-item encoder features (``pooler_output``, and Qwen3-VL's ``deepstack_features`` per
    level) taken in ``index`` order: the same tensors, repeated, so their gradients add up."""
    output.pooler_output = tuple(output.pooler_output[i] for i in index)
    if getattr(output, "deepstack_features", None) is not None:
        output.deepstack_features = [tuple(level[i] for i in index) for level in output.deepstack_features]
    return output


def distinct_media(prompts: PromptBatch, kind: str, prompt_of_row: list[int]) -> tuple[dict, list[int]]:
    """The ``kind`` media tensors of each distinct prompt of ``prompt_of_row`` once (empty when they
    hold none), and for each row in order the positions of its items among them (`item_index`)."""
    distinct = list(dict.fromkeys(prompt_of_row))
    media = prompts.media(kind, distinct)
    return media, (item_index(prompts.items[kind], distinct, prompt_of_row) if media else [])


@contextmanager
def encoded_once(
    model: nn.Module, prompts: PromptBatch, prompt_of_row: list[int], inputs: dict, kinds: tuple[str, ...]
) -> Iterator[None]:
    """Within the context, ``model(**inputs)`` encodes the ``kinds`` media of each distinct prompt
    once.

    Args:
        model: A Hugging Face model whose inner ``model.model`` takes ``mm_encoder_outputs`` and has
            ``get_<kind>_features(flat, grid)`` returning one feature tensor per item (the Qwen-VL
            layout).
        prompts: The rollout's prompts; each shared kind's `zoo.batch.MediaSpec` names ``flat`` and
            ``grid``.
        prompt_of_row: The prompt of each row of ``inputs``.
        inputs: The rows' model inputs; the per-row copies of the shared kinds' ``flat`` tensors are
            removed from it (the grids stay: positions are computed per row from them).
        kinds: Media kinds to share, e.g. ``("image", "video")``.
    """
    plans = {}
    for kind in kinds:
        media, index = distinct_media(prompts, kind, prompt_of_row)
        if media:
            spec = prompts.specs[kind]
            inputs.pop(spec.flat, None)
            plans[kind] = (media[spec.flat], media[spec.grid], index)
    if not plans:
        yield
        return

    def share(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        outputs = dict(kwargs.get("mm_encoder_outputs") or {})
        for kind, (flat, grid, index) in plans.items():
            features = getattr(module, f"get_{kind}_features")(flat, grid, return_dict=True)
            outputs[kind] = repeat_items(features, index)
        return args, kwargs | {"mm_encoder_outputs": outputs}

    handle = model.model.register_forward_pre_hook(share, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()
