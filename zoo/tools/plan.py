"""``zoo plan``: whether a GRPO configuration fits a device, from the model's Hugging Face config
and the run's settings alone (no weights are loaded): per-device memory of each part, a one-line
verdict, and the largest micro-batch and completion length that fit.

The constants are fitted to peaks measured on a CPU (``tests/zoo/plan_measure.py``; the test holds
every measured setting within 25%); on a GPU add the CUDA context (about 0.5 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: float32 ``[n, L, V]`` buffers the log-prob path holds at once today (the cast, the temperature
#: divide, the banned-token fill, the log-softmax and its gradient): 5.7 measured in bfloat16 (issue
#: #33), 2 fitted to float32 models on the CPU (where the cast to float32 copies nothing).
LOGPROB_COPIES, LOGPROB_COPIES_FLOAT32 = 5.7, 2.0
#: float32 ``[N, V]`` buffers of one sampling step (logits, seeded noise in int64 and float64).
SAMPLING_COPIES = 6.0
#: Activation bytes a training pass keeps per token and layer, in units of the hidden width and of
#: the MLP width (residual stream, norms, q/k/v/o, MLP in and out, at the compute dtype).
HIDDEN_ACTIVATIONS, MLP_ACTIVATIONS = 8, 3
#: Attention-score copies per head kept per token and layer, each as long as the sequence (eager and
#: CPU attention materialise the scores; flash attention would not).
ATTENTION_COPIES = 3
#: Parameter-sized temporaries of an optimizer step with state (AdamW's denominator), on average.
STEP_TEMPORARIES = 0.5


@dataclass(frozen=True)
class Widths:
    """The shapes of a policy that decide its memory.

    Attributes:
        params: All parameters.
        trainable: Those that train (all of them, less frozen groups; LoRA: the adapters).
        hidden: Language model width H; ``mlp`` its MLP width, ``layers`` its depth.
        kv: Key/value width of one layer (heads x head dim); ``heads`` its query heads.
        vocab: Output vocabulary V.
        vision_hidden: Vision tower width (0 without one); ``vision_layers`` its depth.
    """

    params: int
    trainable: int
    hidden: int
    mlp: int
    layers: int
    kv: int
    vocab: int
    heads: int = 1
    vision_hidden: int = 0
    vision_layers: int = 0


@dataclass(frozen=True)
class Run:
    """The settings of a run that decide its memory (per rank).

    Attributes:
        prompts: B, prompts per rank; ``generations`` G.
        new_tokens: ``max_new_tokens``; ``prompt_tokens`` the longest prompt; ``media_tokens`` the
            vision patches of one prompt.
        micro_batch: Rows per training pass (None: all B x G).
        dtype_bytes: Bytes of a parameter; ``optimizer_states`` per trainable parameter.
        reference: Whether a KL term keeps a frozen copy of the weights.
        shards: Devices the weights, gradients and optimizer states are sharded over (FSDP2), else
            1.
        checkpointing: Gradient checkpointing (activations of one layer only).
        score_chunk_tokens: Tokens per chunk of a chunked log-prob path (None: today's whole
            micro-batch).
    """

    prompts: int
    generations: int
    new_tokens: int
    prompt_tokens: int
    media_tokens: int = 0
    micro_batch: int | None = None
    dtype_bytes: int = 4
    optimizer_states: int = 2
    reference: bool = False
    shards: int = 1
    checkpointing: bool = False
    score_chunk_tokens: int | None = None

    @property
    def rows(self) -> int:
        """Rows of one training pass."""
        return min(self.micro_batch or self.prompts * self.generations, self.prompts * self.generations)


def estimate(w: Widths, run: Run) -> dict[str, float]:
    """Bytes of each part of a rank's memory, and ``peak``: the weights, reference and optimizer
    state always, plus the larger of sampling (KV cache and per-step buffers) and the gradients with
    the larger of the training pass (activations, log-prob buffers, media encoder) and the
    optimizer step's temporaries."""
    b, n, tokens = run.dtype_bytes, run.rows, run.prompt_tokens + run.new_tokens
    parts = {
        "weights": w.params * b / run.shards,
        "reference copy": w.params * b / run.shards if run.reference else 0.0,
        "optimizer state": w.trainable * b * run.optimizer_states / run.shards,
        "gradients": w.trainable * b / run.shards,
        "activations": n * tokens * b * _layer_activations(w, run, tokens),
        "log-prob buffers": (LOGPROB_COPIES_FLOAT32 if b == 4 else LOGPROB_COPIES) * _scored_tokens(run) * w.vocab * 4,
        "media encoder": run.prompts * run.media_tokens * w.vision_layers * w.vision_hidden * b * HIDDEN_ACTIVATIONS,
        # the optimizer step's temporaries (AdamW builds its update's denominator as a new tensor)
        "optimizer step": STEP_TEMPORARIES * w.trainable * b * min(run.optimizer_states, 1) / run.shards,
        "sampling KV cache": 2 * w.layers * w.kv * b * run.prompts * run.generations * tokens,
        "sampling buffers": SAMPLING_COPIES * run.prompts * run.generations * w.vocab * 4,
    }
    training = sum(parts[k] for k in ("activations", "log-prob buffers", "media encoder"))
    sampling = parts["sampling KV cache"] + parts["sampling buffers"]
    always = sum(parts[k] for k in ("weights", "reference copy", "optimizer state"))
    # the gradients live from the first backward to the step, when the activations are gone
    return parts | {"peak": always + max(parts["gradients"] + max(training, parts["optimizer step"]), sampling)}


def _layer_activations(w: Widths, run: Run, tokens: int) -> float:
    """Activations kept per token, in elements, over every layer (one layer's worth plus a hidden
    state per layer with gradient checkpointing)."""
    per_layer = HIDDEN_ACTIVATIONS * w.hidden + MLP_ACTIVATIONS * w.mlp + ATTENTION_COPIES * w.heads * tokens
    return per_layer + w.hidden * w.layers if run.checkpointing else per_layer * w.layers


def _scored_tokens(run: Run) -> int:
    """Completion tokens whose full-vocabulary logits one training pass holds at once."""
    scored = run.rows * (run.new_tokens + 1)  # the logits of the last prompt position too
    return min(scored, run.score_chunk_tokens) if run.score_chunk_tokens else scored


def largest(w: Widths, run: Run, memory: float, field: str, limit: int) -> int:
    """The largest value of ``field`` (``micro_batch`` or ``new_tokens``) up to ``limit`` whose
    peak fits ``memory`` bytes (0: none does); the peak grows with both."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if estimate(w, replace(run, **{field: mid}))["peak"] <= memory else (lo, mid - 1)
    return lo


def verdict(w: Widths, run: Run, memory: float) -> str:
    """One line: fits or not, the peak, and what to change when it does not."""
    peak = estimate(w, run)["peak"]
    if peak <= memory:
        return f"fits: peak ~{peak / GIB:.2f} GiB of {memory / GIB:.2f} GiB per device"
    rows = largest(w, run, memory, "micro_batch", run.prompts * run.generations)
    tokens = largest(w, run, memory, "new_tokens", run.new_tokens)
    hints = [f"micro_batch_size {rows}"] if rows else []
    hints += [f"max_new_tokens {tokens}"] if tokens else []
    advice = (
        f"try {' or '.join(hints)}" if hints else "too large even at 1 row and 1 token: shard it (FSDP2) or use LoRA"
    )
    return f"does not fit: peak ~{peak / GIB:.2f} GiB of {memory / GIB:.2f} GiB per device; {advice}"


def table(w: Widths, run: Run, memory: float) -> str:
    """The parts, the peak, the verdict, and the largest micro-batch and completion length that
    fit."""
    parts = estimate(w, run)
    lines = [f"{'part':<20} {'GiB':>8}"]
    lines += [f"{name:<20} {value / GIB:>8.3f}" for name, value in parts.items() if name != "peak"]
    lines += [f"{'peak':<20} {parts['peak'] / GIB:>8.3f}", verdict(w, run, memory)]
    rows = largest(w, run, memory, "micro_batch", run.prompts * run.generations)
    tokens = largest(w, run, memory, "new_tokens", 1 << 20)
    lines.append(f"largest micro-batch that fits: {rows} rows; largest max_new_tokens: {tokens}")
    return "\n".join(lines)


# ---- from a configuration ----------------------------------------------------------------------
def model_config(pretrained: str) -> tuple:
    """``(config, processor, dtype bytes)`` of a policy's ``pretrained``, read offline: a tiny
    family's own (nothing is built), a local directory's or the Hugging Face cache's files."""
    from transformers import AutoConfig, AutoProcessor

    from zoo import tiny

    family = pretrained.removeprefix("tiny:")
    if pretrained.startswith("tiny:") and family in tiny.families():
        config, processor = tiny.families()[family].make()
        return config, processor, tiny.families()[family].dtype.itemsize
    path = tiny.resolve(pretrained)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        processor = AutoProcessor.from_pretrained(path, local_files_only=True)
    except OSError as err:
        raise OSError(
            f"zoo plan: cannot read the config of {pretrained!r} offline; give a local directory or "
            "download it once (huggingface-cli download)"
        ) from err
    dtype = str(getattr(config, "dtype", None) or "float32").removeprefix("torch.")
    return config, processor, DTYPE_BYTES.get(dtype, 4)


def widths(config, lora_rank: int | None = None, freeze: list[str] | None = None) -> Widths:
    """`Widths` of a Hugging Face config, its parameters counted on the meta device (no memory)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMultimodalLM

    auto = AutoModelForCausalLM if config.get_text_config() is config else AutoModelForMultimodalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    frozen = sum(p.numel() for name, p in model.named_parameters() if _group(name) in set(freeze or []))
    trainable = params - frozen
    if lora_rank is not None:  # adapters on the language model's linear layers only
        linears = [
            m
            for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and _group(name) == "llm" and "lm_head" not in name
        ]
        trainable = sum(lora_rank * (m.in_features + m.out_features) for m in linears)
    text = config.get_text_config()
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    vision = getattr(config, "vision_config", None)
    return Widths(
        params=params,
        trainable=trainable,
        hidden=text.hidden_size,
        mlp=text.intermediate_size,
        layers=text.num_hidden_layers,
        kv=(getattr(text, "num_key_value_heads", None) or heads) * head_dim,
        vocab=text.vocab_size,
        heads=heads,
        vision_hidden=getattr(vision, "hidden_size", 0) or getattr(vision, "embed_dim", 0) if vision else 0,
        vision_layers=getattr(vision, "depth", 0) or getattr(vision, "num_hidden_layers", 0) if vision else 0,
    )


def _group(name: str) -> str:
    """``vision`` or ``llm``: the `freeze` group a parameter or module name belongs to."""
    return "vision" if any(key in name for key in ("visual", "vision", "audio_tower")) else "llm"


def prompt_shape(config, config_of_model, processor, batch_size: int) -> tuple[int, int]:
    """Tokens of the longest prompt and vision patches per prompt of the configuration's first
    training batch, encoded by its policy's own ``encode`` with ``processor`` (no model loaded)."""
    from lightning import LightningDataModule

    from zoo.policy import PolicyModule
    from zoo.tools.preview import build_section, draw

    policy = build_section(config, "model", PolicyModule, "plan")
    examples = [shown.example for shown in draw(build_section(config, "data", LightningDataModule, "plan"), batch_size)]
    policy.processor = processor
    policy.model = SimpleNamespace(config=config_of_model)  # encode reads only the model's config
    policy.tokenizer.padding_side = "left"
    vars(policy).setdefault("_video_kwargs", {})  # what `load` sets for Qwen3-VL
    tensors = policy.encode(examples).tensors
    patches = sum(tensors[k].shape[0] for k in ("pixel_values", "pixel_values_videos") if k in tensors)
    return int(tensors["attention_mask"].sum(1).max()), patches // max(len(examples), 1)


def run_of(config, prompt_tokens: int, media_tokens: int, devices: int, dtype_bytes: int) -> Run:
    """`Run` of a parsed ``zoo fit`` configuration on ``devices`` devices."""
    model, strategy = config.model.init_args, config.trainer.strategy
    grpo = strategy.init_args
    optimizer = str(getattr(model.optimizer, "class_path", model.optimizer))
    momentum = getattr(getattr(model.optimizer, "init_args", None), "momentum", 0) or 0
    states = (1 if momentum else 0) if optimizer.endswith("SGD") else 2
    rows = grpo.micro_batch_size
    if getattr(grpo, "max_tokens_per_micro_batch", None):  # rows of the longest prompt and completion
        by_tokens = max(1, grpo.max_tokens_per_micro_batch // (prompt_tokens + grpo.max_new_tokens))
        rows = min(rows or by_tokens, by_tokens)
    return Run(
        prompts=config.data.init_args.batch_size,
        generations=grpo.num_generations,
        new_tokens=grpo.max_new_tokens,
        prompt_tokens=prompt_tokens,
        media_tokens=media_tokens,
        micro_batch=rows,
        dtype_bytes=DTYPE_BYTES[model.dtype] if model.dtype else dtype_bytes,
        optimizer_states=states,
        reference=grpo.beta > 0 and model.lora is None,
        shards=devices if "FSDP" in str(strategy.class_path) else 1,
        checkpointing=bool(model.gradient_checkpointing),
        score_chunk_tokens=getattr(model, "score_chunk_tokens", None),
    )


def plan(
    fit_args: list[str] | None = None,
    devices: int = 1,
    memory_gib: float = 24.0,
    prompt_tokens: int | None = None,
    media_tokens: int | None = None,
) -> str:
    """Estimate whether a GRPO configuration fits a device: per-device memory of the weights,
    gradients, optimizer state, training activations, log-prob buffers, media encoder and sampling
    KV cache, a one-line verdict, and the largest micro-batch and completion length that fit.

    Nothing is loaded: widths come from the model's Hugging Face config (a tiny family, a local
    directory or the Hugging Face cache, offline) and the prompt length from the configuration's
    first batch, encoded by its processor.

    Args:
        fit_args: Every other argument, read as by ``zoo fit``: ``--config`` (repeatable) and dotted
            overrides such as ``--trainer.strategy.init_args.micro_batch_size 4``.
        devices: Devices the run spreads over (FSDP2 strategies shard weights, gradients and
            optimizer state over them).
        memory_gib: Memory of one device, GiB.
        prompt_tokens: Tokens of the longest prompt; None encodes the first batch to count them.
        media_tokens: Vision patches per prompt; None counts them in the first batch.
    """
    from zoo.tools.preview import parse_config

    if devices < 1 or memory_gib <= 0:
        raise ValueError(f"devices must be >= 1 and memory_gib > 0, got {devices} and {memory_gib}")
    config = parse_config(list(fit_args or []))
    hf, processor, dtype_bytes = model_config(config.model.init_args.pretrained)
    if prompt_tokens is None or media_tokens is None:
        try:
            counted = prompt_shape(config, hf, processor, config.data.init_args.batch_size)
        except (ValueError, RuntimeError, OSError, SystemExit) as err:  # a source that needs its data, ...
            raise ValueError(
                f"cannot count the prompt tokens of a first batch ({err}); give --prompt_tokens and --media_tokens"
            ) from err
        prompt_tokens = counted[0] if prompt_tokens is None else prompt_tokens
        media_tokens = counted[1] if media_tokens is None else media_tokens
    lora = config.model.init_args.lora
    w = widths(hf, getattr(lora, "rank", None) if lora else None, config.model.init_args.freeze)
    run = run_of(config, prompt_tokens, media_tokens, devices, dtype_bytes)
    text = table(w, run, memory_gib * GIB)
    print(text)
    return text
