"""LLaVA-style policies built from parts: a media encoder -> an MLP projector -> any Hugging Face
causal LM.

Each media item becomes M feature vectors that replace M placeholder tokens of the chat-templated
prompt in the LM's ``inputs_embeds``. `SplicedLM` wraps the three parts so that ``forward`` and
``generate`` take the same inputs as a Hugging Face VLM (``input_ids``, ``attention_mask`` and media
tensors), and `PolicyModule` samples and scores it unchanged. Subclasses only say how to build the
encoder (`SplicedPolicy.build_encoder`).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from zoo.batch import PromptBatch
from zoo.features import distinct_media
from zoo.media import check_placeholders, media_parts
from zoo.policy import PolicyModule
from zoo.tiny import Tiny, build_tokenizer, text_config

CONFIG = "spliced_config.json"
WEIGHTS = "spliced_encoder.pt"


def positions(attention_mask: Tensor) -> Tensor:
    """Position ids ``[B, T]`` of left-padded rows: 0 at each row's first real token (as
    ``generate`` does)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class SplicedLM(nn.Module):
    """``encoder`` (media tensors -> ``[items, M, D_enc]``) -> ``projector`` -> ``lm`` input
    embeddings.

    The encoder declares ``media_keys`` (the tensors it takes), ``spec`` (their
    `zoo.batch.MediaSpec`), ``num_tokens`` (M) and ``prepare(parts) -> dict`` (content parts to
    tensors).
    """

    def __init__(self, lm: nn.Module, encoder: nn.Module, projector: nn.Module, placeholder_id: int):
        super().__init__()
        self.lm = lm
        self.encoder = encoder
        self.projector = projector
        self.placeholder_id = placeholder_id

    def embed(self, input_ids: Tensor, media: dict[str, Tensor], media_index: Tensor | None = None) -> Tensor:
        """Token embeddings ``[B, T, D]`` with the projected media features at the placeholder
        tokens; ``media_index`` (one entry per placeholder item, in order) picks each item's
        features from ``media`` when it holds every distinct item once."""
        embeds = self.lm.get_input_embeddings()(input_ids)  # [B, T, D]
        slots = input_ids == self.placeholder_id  # [B, T]
        if not media:
            if slots.any():
                raise ValueError("the prompts hold media placeholder tokens but no media tensors came with them")
            return embeds
        features = self.projector(self.encoder(**media)).to(embeds.dtype)  # [items, M, D]
        features = features if media_index is None else features[media_index]  # [placeholder items, M, D]
        if int(slots.sum()) != features.shape[0] * features.shape[1]:
            raise ValueError(
                f"the prompts hold {int(slots.sum())} placeholder tokens but the media give "
                f"{features.shape[0]} x {features.shape[1]} features"
            )
        return embeds.masked_scatter(slots[..., None], features)

    def _split(self, kwargs: dict) -> dict[str, Tensor]:
        return {key: kwargs.pop(key) for key in self.encoder.media_keys if key in kwargs}

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        position_ids: Tensor | None = None,
        media_index: Tensor | None = None,
        **kwargs,
    ):
        media = self._split(kwargs)
        position_ids = positions(attention_mask) if position_ids is None else position_ids
        return self.lm(
            inputs_embeds=self.embed(input_ids, media, media_index),
            attention_mask=attention_mask,
            position_ids=position_ids,
            **kwargs,
        )

    def generate(self, input_ids: Tensor, attention_mask: Tensor, **kwargs) -> Tensor:
        """Prompt + new tokens ``[B, T + L]``: the prompt is fed as embeddings, later steps as token
        ids. With a ``cache`` that already holds the prompt's media
        (`zoo.rollout.hf.generate_shared`) the rest is text."""
        if kwargs.get("cache") is not None:
            return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        embeds = self.embed(input_ids, self._split(kwargs))
        return self.lm.generate(input_ids=input_ids, inputs_embeds=embeds, attention_mask=attention_mask, **kwargs)

    # the parts of the Hugging Face model API that PolicyModule and generate_shared use
    @property
    def config(self):
        return self.lm.config

    def _prepare_position_ids_for_generation(self, input_ids: Tensor, model_kwargs: dict) -> Tensor:
        return positions(model_kwargs["attention_mask"])

    @property
    def generation_config(self):
        return self.lm.generation_config

    @property
    def _no_split_modules(self) -> list[str]:
        return list(getattr(self.lm, "_no_split_modules", None) or [])

    def get_output_embeddings(self) -> nn.Module:
        return self.lm.get_output_embeddings()

    def gradient_checkpointing_enable(self) -> None:
        self.lm.gradient_checkpointing_enable()


class SplicedPolicy(PolicyModule):
    """Base of the encoder -> projector -> causal LM policies.

    ``pretrained`` is either a causal LM (hub id, directory, ``tiny:qwen2``), joined to a new
    encoder and projector built from the constructor arguments with a fixed ``init_seed`` (so the
    reference model equals the initial policy), or a directory written by `save_pretrained`, which
    restores the encoder settings and weights it saved.

    Args:
        pretrained: A causal LM, a saved policy directory (see above) or a zoo checkpoint.
        placeholder: The token whose copies the media features replace; added to the tokenizer (and
            the embeddings resized) when the LM lacks it. Banned from completions.
        init_seed: Seed of the new encoder and projector weights.
        **kwargs: Options common to every policy (see `PolicyModule`).
    """

    media_kind: ClassVar[str]
    encoder_group: ClassVar[str] = "encoder"

    def __init__(self, pretrained: str, placeholder: str, init_seed: int = 0, **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        self.placeholder = placeholder
        self.init_seed = init_seed

    @abstractmethod
    def encoder_config(self) -> dict:
        """The constructor settings of the encoder, JSON-serialisable (saved with the policy)."""

    @abstractmethod
    def build_encoder(self, config: dict, load_weights: bool) -> nn.Module:
        """An encoder from ``config`` (see `SplicedLM`), with an ``out_dim`` attribute.
        ``load_weights`` False: its weights come from a saved policy, so skip any download of
        pretrained weights."""

    def load(self, path: str) -> tuple[SplicedLM, object]:
        from transformers import AddedToken, AutoModelForCausalLM, AutoTokenizer

        saved = Path(path, CONFIG)
        config = (
            json.loads(saved.read_text())
            if saved.exists()
            else {"placeholder": self.placeholder, "encoder": self.encoder_config()}
        )
        tokenizer = AutoTokenizer.from_pretrained(path)
        lm = AutoModelForCausalLM.from_pretrained(path, **self.load_kwargs())
        if config["placeholder"] not in tokenizer.get_vocab():
            tokenizer.add_tokens(
                [AddedToken(config["placeholder"], special=True, normalized=False)], special_tokens=True
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.init_seed)
            if len(tokenizer) > lm.get_input_embeddings().num_embeddings:
                lm.resize_token_embeddings(len(tokenizer))
            encoder = self.build_encoder(config["encoder"], load_weights=not saved.exists())
            width = lm.get_input_embeddings().embedding_dim
            projector = nn.Sequential(nn.Linear(encoder.out_dim, width), nn.GELU(), nn.Linear(width, width))
        model = SplicedLM(lm, encoder, projector, tokenizer.convert_tokens_to_ids(config["placeholder"]))
        if saved.exists():
            state = torch.load(Path(path, WEIGHTS), map_location="cpu", weights_only=True)
            model.encoder.load_state_dict(state["encoder"])
            model.projector.load_state_dict(state["projector"])
        model.encoder.to(lm.dtype)
        model.projector.to(lm.dtype)
        self.placeholder = config["placeholder"]
        return model, tokenizer

    def _banned_ids(self, vocab: int) -> list[int]:
        return sorted(set(super()._banned_ids(vocab)) | {self.model.placeholder_id})

    def media_once(self, model: nn.Module, rollout, rows: Tensor, inputs: dict) -> AbstractContextManager:
        """The encoder runs on each distinct prompt's items once; `SplicedLM` repeats their features
        per row (``media_index``)."""
        if self.reuse_media_features:
            media, index = distinct_media(rollout.prompts, self.media_kind, (rows // rollout.num_generations).tolist())
            if media:
                inputs |= media | {"media_index": torch.tensor(index)}
        return nullcontext()

    def scoring_positions(self, model: nn.Module, inputs: dict) -> Tensor:
        """`SplicedLM` numbers the positions of each row from its first real token."""
        return positions(inputs["attention_mask"])

    def module_groups(self) -> dict[str, list[nn.Module]]:
        return {self.encoder_group: [self.model.encoder], "projector": [self.model.projector], "llm": [self.model.lm]}

    def encode(self, examples: list) -> PromptBatch:
        self.check_media(examples)
        parts = [media_parts(ex, self.media_kind) for ex in examples]
        texts = [
            self.tokenizer.apply_chat_template(self._flatten(ex), tokenize=False, add_generation_prompt=True)
            for ex in examples
        ]
        num_tokens = self.model.encoder.num_tokens
        tensors = dict(
            self.tokenizer(
                [t.replace(self.placeholder, self.placeholder * num_tokens) for t in texts],
                padding=True,
                return_tensors="pt",
            )
        )
        flat = [p for per in parts for p in per]
        if flat:
            tensors |= self.model.encoder.prepare(flat)
        check_placeholders(
            tensors["input_ids"],
            self.model.placeholder_id,
            self.placeholder,
            self.media_kind,
            len(flat) * num_tokens,
            hint="does a text contain the placeholder?",
        )
        return PromptBatch(
            tensors=tensors,
            items={self.media_kind: [len(p) for p in parts]},
            specs={self.media_kind: self.model.encoder.spec},
        )

    def _flatten(self, example) -> list[dict]:
        """Messages with string contents, one placeholder per media item (any chat template renders
        these)."""
        out = []
        for message in example.messages:
            content = message["content"]
            if not isinstance(content, str):  # `check_media` let only text and media_kind parts through
                content = "".join(p["text"] if p["type"] == "text" else self.placeholder for p in content)
            out.append({"role": message["role"], "content": content})
        return out

    def save_pretrained(self, path: str) -> None:
        """The LM and tokenizer as a Hugging Face directory (loadable as a plain causal LM too),
        plus the encoder and projector weights and settings: ``pretrained=<path>`` restores the
        whole policy."""
        model = self.merged_model()
        model.lm.save_pretrained(path)
        self.processor.save_pretrained(path)
        config = {"class": type(self).__name__, "placeholder": self.placeholder, "encoder": model.encoder.config}
        Path(path, CONFIG).write_text(json.dumps(config, indent=2))
        torch.save(
            {"encoder": model.encoder.state_dict(), "projector": model.projector.state_dict()}, Path(path, WEIGHTS)
        )


# ---- tiny random-init models (`zoo.tiny`)
# ----------------------------------------------------------
def _qwen2():
    """A text-only Qwen2 causal LM: the language model of the spliced policies' tests
    (``tiny:qwen2``)."""
    from transformers import Qwen2Config

    tok = build_tokenizer()
    return Qwen2Config(**text_config(tok) | {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}), tok


TINY = {"qwen2": Tiny(_qwen2)}
