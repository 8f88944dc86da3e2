"""PolicyModule: a Hugging Face generative model as a LightningModule, driven by a GRPO strategy.

The policy samples completions, scores their tokens (log-probs and entropy) and exports to Hugging
Face format; the strategy (`zoo.grpo`) owns the algorithm. Only `load`, `encode` and `module_groups`
are model-specific.
"""

from __future__ import annotations

import copy
import re
from abc import ABC, abstractmethod
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn

from zoo import tiny
from zoo.activations import lean_activations
from zoo.batch import PromptBatch
from zoo.checkpoints import is_checkpoint
from zoo.lora import LoRA, adapters_disabled, add_adapters, merge_adapters
from zoo.rollout.engine import Prompts, RolloutEngine, Sampling, completion_ids
from zoo.rollout.hf import HFEngine
from zoo.rollout.rollout import Rollout, completion_mask
from zoo.rollout.seeds import example_row_seeds
from zoo.scoring import Scoring
from zoo.sharding import reshard, shard

# Special tokens a completion must never contain: media placeholders make the next forward fail.
_BANNED_SPECIAL = re.compile(r"image|video|vision|audio|<\|im_start\|>", re.IGNORECASE)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CACHES = ("dynamic", "static")


class PolicyModule(Scoring, LightningModule, ABC):
    """A generative (multimodal) language model trained as an RL policy.

    Args:
        pretrained: Hugging Face hub id or local directory; ``tiny:<family>`` builds an offline tiny
            random-init model (see `zoo.tiny`); in a config, a zoo checkpoint (``.ckpt``, or an
            FSDP2 checkpoint folder) starts from its trained weights, e.g. an SFT cold start before
            GRPO (the CLI exports it once, `zoo.export.as_pretrained`).
        optimizer: Optimizer factory applied to the trainable parameters.
        scheduler: Optional learning-rate scheduler factory, stepped once per optimizer step.
        freeze: Module groups to freeze, e.g. ``[vision]``; see `module_groups` of the model class.
        lora: Train low-rank adapters (PEFT) instead of the full weights, e.g. ``{rank: 16, alpha:
            32}``; only the adapters train, the language model is adapted by default. With a KL term
            the reference is the same model with its adapters switched off (no second copy). None
            trains the full weights (minus ``freeze``).
        dtype: Parameter dtype: ``float32``, ``bfloat16`` or ``float16``; None keeps the
            checkpoint's.
        attn_implementation: Attention kernel passed to ``from_pretrained`` (``sdpa``, ``eager``,
            ...).
        gradient_checkpointing: Recompute activations in the backward pass to save memory.
        lean_activations: Gated MLPs keep only their two projections for the backward and RMS norms
            only their input; the backward recomputes the rest, elementwise work only
            (`zoo.activations`). Same values and gradients, about half the activation memory per
            token at Qwen2.5-VL-3B's widths; modules narrower than 1,024 and an MLP whose down
            projection has LoRA keep their own.
        reuse_media_features: Scoring passes (training forward, old and reference log-probs) encode
            each prompt's media once and share the features among its completions (Qwen-VL,
            Qwen2.5-Omni images and videos, the spliced encoder LMs; see `media_once`); False
            encodes every completion's copy. The log-probs are the same either way.
        trim_padding: Scoring passes leave out the prompt padding and completion tail that no row of
            the micro-batch uses. The log-probs are the same either way.
        score_chunk_tokens: Scoring passes apply the output head to the final hidden states this
            many tokens at a time and recompute each chunk's logits in the backward, so memory grows
            with the chunk instead of with micro-batch x completion length x vocabulary; None
            materialises the full logits. Same log-probs and gradients either way.
        score_prefix_once: Scoring passes run each distinct prompt of a micro-batch (minus its last
            token, media included) once into a KV cache that its rows continue, instead of every
            row's copy of it; gradients reach the prompt through the cached keys and values. Falls
            back to whole rows (logged once) with gradient checkpointing and under FSDP2. The
            log-probs and gradients are the same either way.
        pack_sequences: Scoring passes run a micro-batch as one sequence without padding: each
            row's prompt (padding left out) and completion (through its last counted token) one
            after the other, position ids restarting at each row (Qwen-VL's and Qwen2.5-Omni's 3D
            rope ids computed per row), so the layers' linear work skips padding (``sdpa`` and
            ``eager`` still compute attention over the whole packed sequence, masked, so on CPU it
            is no faster: see docs/performance.md), and a strategy's ``max_tokens_per_micro_batch``
            counts the packed tokens. Same log-probs and gradients as the padded pass. Needs
            attention ``sdpa``, ``eager`` or flash attention; every family packs but Gemma 3, which
            refuses (`packing_refused`). Takes the place of ``score_prefix_once``.
        share_prefix: Sample the G completions of a prompt from one encoding of it: media encoders
            and the prompt prefill run once per prompt and the KV cache is repeated G times (same
            completions as G copies of the prompt, for the same seed). False repeats every prompt G
            times.
        cache_implementation: KV cache of sampling: ``dynamic`` (sized by the tokens written so far;
            zoo's decoding loop writes them in place into a buffer allocated once) or ``static``
            (allocated once for prompt + ``max_new_tokens``, attention over all of it; what CUDA
            graphs and ``compile_decode`` need).
        compile_decode: ``torch.compile`` the decoding forward pass (CUDA, with the static cache;
            compiled on the first rollout, which takes a while). Ignored on CPU.
        engine: The rollout engine that samples completions (`zoo.rollout.engine.RolloutEngine`);
            None is `zoo.rollout.HFEngine`, zoo's decoding loop on this model (the sampling settings
            above are its). Log-probs are always recomputed by the policy.
    """

    #: The content part types (`tasks.Example` messages) its prompts may hold: "text", "image",
    #: "video", ...
    content_kinds: ClassVar[frozenset[str]] = frozenset({"text"})
    #: Offline ``pretrained`` values of this family (`zoo.tiny`); contract tests run every one of
    #: them.
    tiny_checkpoints: ClassVar[tuple[str, ...]] = ()
    #: Special tokens (by content) that sampling suppresses: media placeholders and image-structure
    #: tokens.
    banned_special: ClassVar[re.Pattern] = _BANNED_SPECIAL
    #: Media kinds whose encoder features a scoring pass computes once per prompt (`zoo.features`).
    shared_media: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        pretrained: str,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        scheduler: LRSchedulerCallable | None = None,
        freeze: list[str] | None = None,
        lora: LoRA | None = None,
        dtype: str | None = None,
        attn_implementation: str | None = None,
        gradient_checkpointing: bool = False,
        lean_activations: bool = True,
        reuse_media_features: bool = True,
        trim_padding: bool = True,
        score_chunk_tokens: int | None = 256,
        score_prefix_once: bool = True,
        pack_sequences: bool = False,
        share_prefix: bool = True,
        cache_implementation: str = "dynamic",
        compile_decode: bool = False,
        engine: RolloutEngine | None = None,
    ):
        super().__init__()
        if dtype is not None and dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)} or None, got {dtype!r}")
        if cache_implementation not in CACHES:
            raise ValueError(f"cache_implementation must be one of {CACHES}, got {cache_implementation!r}")
        if score_chunk_tokens is not None and score_chunk_tokens < 1:
            raise ValueError(f"score_chunk_tokens must be at least 1 or null, got {score_chunk_tokens}")
        if compile_decode and cache_implementation != "static":
            raise ValueError(
                "compile_decode needs cache_implementation: static (a dynamic cache changes shape "
                "every token, so the compiled graph would be rebuilt every step)"
            )
        self.lora = LoRA(**lora) if isinstance(lora, dict) else lora
        self.save_hyperparameters(ignore=["optimizer", "scheduler", "engine"])  # checkpoints hold plain data
        if isinstance(self.hparams.get("lora"), LoRA):  # plain data, so checkpoints load with weights_only
            self.hparams["lora"] = asdict(self.hparams["lora"])
        self.pretrained = pretrained
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.freeze = list(freeze or [])
        self.dtype_name = dtype
        self.attn_implementation = attn_implementation
        self.gradient_checkpointing = gradient_checkpointing
        self.lean_activations = lean_activations
        self.reuse_media_features = reuse_media_features
        self.trim_padding = trim_padding
        self.score_chunk_tokens = score_chunk_tokens
        self.score_prefix_once = score_prefix_once
        self.pack_sequences = pack_sequences
        self.share_prefix = share_prefix
        self.cache_implementation = cache_implementation
        self.compile_decode = compile_decode
        self.engine = HFEngine() if engine is None else engine
        self._synced, self._loads = None, 0  # weights version the engine holds; checkpoint loads so far
        self.model: nn.Module | None = None
        self.processor = None
        self.automatic_optimization = False  # the GRPO strategy runs backward and optimizer steps itself

    # ---- model-specific -------------------------------------------------------------------------
    @abstractmethod
    def load(self, path: str) -> tuple[nn.Module, object]:
        """Load ``(model, processor)`` from a local directory or hub id."""

    @abstractmethod
    def encode(self, examples: list) -> PromptBatch:
        """Chat template + processor for a list of `tasks.Example`, left padded, with media
        bookkeeping."""

    @abstractmethod
    def module_groups(self) -> dict[str, list[nn.Module]]:
        """Named groups of submodules that ``freeze`` can refer to."""

    # ---- setup --------------------------------------------------------------------------------
    @property
    def tokenizer(self):
        return getattr(self.processor, "tokenizer", self.processor)

    def load_kwargs(self) -> dict:
        """Keyword arguments for ``from_pretrained`` common to all families."""
        kwargs = {}
        if self.dtype_name is not None:
            kwargs["dtype"] = DTYPES[self.dtype_name]
        if self.attn_implementation is not None:
            kwargs["attn_implementation"] = self.attn_implementation
        return kwargs

    def _load_pretrained(self) -> tuple:
        """`load` of ``pretrained``, failing in one line that names it: a missing directory, or a
        model that cannot be read or fetched (offline, a hub id must already be in the Hugging Face
        cache)."""
        if is_checkpoint(self.pretrained):
            raise ValueError(
                f"pretrained={self.pretrained!r} is a zoo training checkpoint: `zoo fit` exports it "
                "for you; in Python pass zoo.export.as_pretrained(path) instead"
            )
        path = tiny.resolve(self.pretrained)
        if path.startswith((".", "/", "~")) and not Path(path).expanduser().is_dir():
            raise FileNotFoundError(
                f"pretrained={self.pretrained!r}: no such directory; give a model directory, "
                "a hub id (org/name) or tiny:<family>"
            )
        try:
            return self.load(path)
        except OSError as err:
            raise OSError(f"pretrained={self.pretrained!r} cannot be loaded: {' '.join(str(err).split())}") from err

    def configure_model(self) -> None:
        if self.model is not None:
            return
        self.model, self.processor = self._load_pretrained()
        self.model.train()  # from_pretrained returns eval mode; Lightning toggles modes from here on
        if self.pack_sequences and (reason := self.packing_refused()):
            raise ValueError(f"pack_sequences: {type(self).__name__} ({self.pretrained}) cannot pack rows: {reason}")
        if self.lean_activations:
            lean_activations(self.model)
        self.tokenizer.padding_side = "left"  # batched generation appends after the prompt
        self._apply_freeze()
        if self.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self._shard(self.model)
        self.eos_ids = self._eos_ids()
        vocab = self.model.get_output_embeddings().weight.shape[0]
        self.banned_ids = self._banned_ids(vocab)
        self.register_buffer("banned_mask", torch.zeros(vocab, dtype=torch.bool), persistent=False)
        self.banned_mask[self.banned_ids] = True
        self.engine.bind(self)

    def _shard(self, model: nn.Module) -> None:
        """Under FSDP2 (a device mesh from `zoo.grpo.GRPOFSDPStrategy`): shard the blocks the
        checkpoint names in ``_no_split_modules``, each once, then the root
        (`zoo.sharding.shard`)."""
        if self._device_mesh is not None:
            shard(model, self._device_mesh["data_parallel"], **getattr(self.trainer.strategy, "fsdp_kwargs", {}))

    def _apply_freeze(self) -> None:
        """Freeze the ``freeze`` groups, or with LoRA add the adapters and freeze everything
        else."""
        groups = self.module_groups()
        unknown = set(self.freeze) - set(groups)
        if unknown:
            raise ValueError(f"unknown freeze groups {sorted(unknown)}; {type(self).__name__} has {sorted(groups)}")
        if self.lora is not None:
            both = set(self.freeze) & set(self.lora.groups)
            if both:
                raise ValueError(
                    f"groups {sorted(both)} are both frozen and adapted by LoRA; with LoRA only the "
                    "adapters of lora.groups train, every other weight is frozen already"
                )
            add_adapters(self.model, groups, self.lora)
            return
        for name in self.freeze:
            for module in groups[name]:
                module.requires_grad_(False)

    def check_media(self, examples: list) -> None:
        """Every content part of ``examples`` must be of a kind in `content_kinds`."""
        for ex in examples:
            for message in ex.messages:
                content = message["content"]
                kinds = {"text"} if isinstance(content, str) else {part["type"] for part in content}
                if not kinds <= self.content_kinds:
                    raise ValueError(
                        f"{type(self).__name__} takes {sorted(self.content_kinds)} content, but an "
                        f"example of task {ex.task!r} has {sorted(kinds - self.content_kinds)}"
                    )

    def _eos_ids(self) -> list[int]:
        configured = self.model.generation_config.eos_token_id
        ids = configured if isinstance(configured, list) else [configured]
        ids = [i for i in [self.tokenizer.eos_token_id, *ids] if i is not None]
        if not ids:
            raise ValueError(f"{self.pretrained}: neither the tokenizer nor the generation config names an EOS token")
        return list(dict.fromkeys(ids))

    def _banned_ids(self, vocab: int) -> list[int]:
        """Media placeholders, turn starts, the pad token (unless it ends text) and the ``vocab``
        rows past the tokenizer."""
        tok = self.tokenizer
        banned = {i for i, t in tok.added_tokens_decoder.items() if t.special and self.banned_special.search(t.content)}
        if tok.pad_token_id is not None and tok.pad_token_id not in self.eos_ids:
            banned.add(tok.pad_token_id)
        banned.update(range(len(tok), vocab))
        return sorted(banned - set(self.eos_ids))

    # ---- rollouts -----------------------------------------------------------------------------
    def generation_config(self, max_new_tokens: int):
        """Greedy ``generate`` settings that ignore the checkpoint's own defaults (instruct models
        ship low temperatures and top-k that GRPO must not inherit); sampling is added by
        `SeededSampling`."""
        from transformers import GenerationConfig

        static = self.cache_implementation == "static"
        return GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=self.eos_ids,
            pad_token_id=self.eos_ids[0],
            suppress_tokens=self.banned_ids,
            cache_implementation="static" if static else None,
            disable_compile=not self.compile_decode,
        )

    @torch.no_grad()
    def sample(
        self,
        examples: list,
        num_generations: int = 1,
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        greedy: bool = False,
        seed: int | None = None,
        share_prefix: bool | None = None,
    ) -> Rollout:
        """Generate ``num_generations`` completions per example with the rollout engine (`engine`).

        Sampling noise of row ``(b, g)`` comes from ``(seed, examples[b].uid, g)``: the same example
        and seed give the same completion in any batch on any rank. ``seed`` None draws one from
        torch's generator. ``greedy`` decodes deterministically (temperature 1 for scoring).
        ``share_prefix`` None follows the policy's setting.
        """
        prompts = self.encode(examples).to(self.device)
        seeds = None
        if not greedy:
            seed = int(torch.randint(0, 2**62, ())) if seed is None else seed
            seeds = example_row_seeds(examples, num_generations, seed)
        sampling = Sampling(
            max_new_tokens, temperature, top_p, greedy, seeds, tuple(self.eos_ids), tuple(self.banned_ids), share_prefix
        )
        self._sync_engine()
        try:
            out = self.engine.generate(Prompts(list(examples), prompts), num_generations, sampling)
        finally:
            self.engine.offload()
        ids = completion_ids(out, len(examples) * num_generations, sampling, type(self.engine).__name__, self.device)
        return self._rollout(examples, prompts, num_generations, ids, 1.0 if greedy else temperature)

    def _rollout(
        self, examples: list, prompts: PromptBatch, num_generations: int, ids: Tensor, temperature: float
    ) -> Rollout:
        """The rollout of sampled ids ``[N, L]``: counted tokens through the first EOS, EOS after
        it, texts."""
        mask, truncated = completion_mask(ids, self.eos_ids)
        ids = ids.masked_fill(~mask, self.eos_ids[0])
        lengths = mask.sum(1) - (~truncated).long()  # tokens before the EOS
        texts = self.tokenizer.batch_decode([row[:n] for row, n in zip(ids, lengths.tolist(), strict=True)])
        return Rollout(
            examples=list(examples),
            prompts=prompts,
            num_generations=num_generations,
            completion_ids=ids,
            completion_mask=mask,
            truncated=truncated,
            completions=texts,
            temperature=temperature,
        )

    def _sync_engine(self) -> None:
        """Push the weights to the rollout engine when they changed since the last push (the version
        moves with every optimizer step and every checkpoint load)."""
        step = self._trainer.global_step if self._trainer is not None else 0
        if self._synced != (step, self._loads):
            self.engine.sync_weights(self)
            self._synced = (step, self._loads)

    def training_step(self, rollout: Rollout, rows: Tensor, greedy: bool = False) -> dict[str, Tensor]:
        """Differentiable log-probs and entropy of ``rows`` of a rollout and, with ``greedy``,
        whether each token is the greedy one (`token_scores`); the strategy forms the loss."""
        return self.token_scores(rollout, rows, greedy=greedy)

    @torch.no_grad()
    def reference_log_probs(self, rollout: Rollout, rows: Tensor) -> Tensor:
        """Log-probs under the frozen initial weights: with LoRA the policy's own model with its
        adapters switched off, otherwise a copy loaded once from ``pretrained`` on first use."""
        if self.lora is not None:
            with adapters_disabled(self.model):
                return self.token_log_probs(rollout, rows, entropy=False)[0]
        if "_reference" not in self.__dict__:  # kept out of the module tree: never trained nor saved
            reference, _ = self._load_pretrained()
            reference.eval().requires_grad_(False)
            self._shard(reference)
            self.__dict__["_reference"] = reference.to(self.device)
        reference = self.__dict__["_reference"]
        try:
            return self.token_log_probs(rollout, rows, model=reference, entropy=False)[0]
        finally:
            reshard(reference)

    # ---- Lightning ----------------------------------------------------------------------------
    def configure_optimizers(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            raise ValueError(f"nothing to train: every parameter is frozen (freeze={self.freeze})")
        optimizer = self.optimizer_factory(params)
        if self.scheduler_factory is None:
            return optimizer
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": self.scheduler_factory(optimizer), "interval": "step"},
        }

    def transfer_batch_to_device(self, batch, device, dataloader_idx: int):
        """Batches are lists of `tasks.Example` with PIL media: `encode` moves the tensors it makes,
        so the batch itself stays put (Lightning would deep-copy every dataclass and image on the
        way)."""
        return batch

    def validation_step(self, batch, batch_idx):
        raise RuntimeError(
            "a PolicyModule is trained and evaluated by a GRPO strategy: set trainer.strategy "
            "to zoo.grpo.GRPOStrategy or zoo.grpo.GRPODDPStrategy"
        )

    test_step = validation_step

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._loads += 1  # new weights: the rollout engine gets them before it samples again

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["policy_class"] = f"{type(self).__module__}.{type(self).__qualname__}"  # for `zoo export`

    def save_pretrained(self, path: str) -> None:
        """Export model and processor (with its chat template) as a Hugging Face directory loadable
        with ``from_pretrained``; LoRA adapters are merged into a copy of the weights."""
        self.merged_model().save_pretrained(path)
        self.processor.save_pretrained(path)

    def merged_model(self) -> nn.Module:
        """The model to export: itself, or with LoRA a copy whose adapters are merged into the
        weights."""
        return self.model if self.lora is None else merge_adapters(copy.deepcopy(self.model))
