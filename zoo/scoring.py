"""How a policy scores the tokens of a rollout: log-probs, entropy and greedy flags of the sampled
tokens under the policy (or its reference), through the single-turn, multi-turn, prefix-shared and
packed passes (`zoo.rollout.scoring`, `zoo.rollout.turns`, `zoo.rollout.packing`). `PolicyModule`
inherits it; a family overrides its hooks (`media_once`, `scoring_positions`,
`packed_position_ids`, `packing_refused`)."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import Tensor, nn

from zoo.features import encoded_once
from zoo.rollout.packing import PACKING_ATTENTION, pack_inputs, row_positions, scored_positions, unpack
from zoo.rollout.rollout import Rollout
from zoo.rollout.scoring import SharedPrefix, score_tokens, split_prefix
from zoo.rollout.turns import MultiTurnRollout, score_turns
from zoo.sharding import is_sharded

log = logging.getLogger(__name__)


class Scoring:
    """The scoring half of `zoo.PolicyModule` (its settings ``trim_padding``,
    ``score_chunk_tokens``, ``score_prefix_once``, ``pack_sequences``, ``reuse_media_features``
    and ``shared_media`` apply)."""

    def token_log_probs(
        self, rollout: Rollout, rows: Tensor, model: nn.Module | None = None, entropy: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Log-probs of the sampled tokens and the per-token entropy under ``model`` (default: the
        policy).

        Logits are divided by the sampling temperature and banned tokens masked, so the distribution
        matches the one that was sampled. Returns two ``[n, L]`` tensors for the ``n`` rows, 0 past
        each row's completion (outside ``completion_mask``); ``entropy`` False gives None for the
        entropy and skips its work.
        """
        scores = self.token_scores(rollout, rows, model, entropy)
        return scores["logps"], scores["entropy"]

    def token_scores(
        self,
        rollout: Rollout,
        rows: Tensor,
        model: nn.Module | None = None,
        entropy: bool = True,
        greedy: bool = True,
    ) -> dict[str, Tensor]:
        """`token_log_probs` (``logps``, ``entropy``) and ``greedy``: whether each completion token
        is the most likely one (what SFT's token accuracy counts), all ``[n, L]``
        (`zoo.rollout.scoring`); ``greedy`` False gives None in its place and skips its work."""
        model = model or self.model
        if isinstance(rollout, MultiTurnRollout):

            def turn_scores(turn: Rollout, local: Tensor) -> dict[str, Tensor]:
                return self.token_scores(turn, local, model, entropy, greedy)

            return score_turns(rollout, rows, turn_scores, is_sharded(model))
        if self.pack_sequences:
            return self._packed_scores(model, rollout, rows, entropy, greedy)
        inputs = rollout.model_inputs(rows, trim=self.trim_padding)
        length = rollout.completion_columns(rows) if self.trim_padding else rollout.completion_ids.shape[1]
        ids, mask = rollout.completion_ids[rows, :length], rollout.completion_mask[rows, :length]  # [n, length]
        split = self.shared_prefix(model, rollout, rows, inputs, length)
        inputs, prefix = split or (inputs, None)
        with nullcontext() if prefix else self.media_once(model, rollout, rows, inputs):
            scores = score_tokens(
                model,
                inputs,
                ids,
                mask,
                rollout.temperature,
                self.banned_mask,
                self.score_chunk_tokens,
                entropy,
                prefix=prefix,
                greedy=greedy,
            )
        cut = (0, rollout.completion_ids.shape[1] - length)
        return {k: None if v is None else nn.functional.pad(v, cut) for k, v in scores.items()}  # [n, L]

    def shared_prefix(
        self, model: nn.Module, rollout: Rollout, rows: Tensor, inputs: dict, length: int
    ) -> tuple[dict, SharedPrefix] | None:
        """``inputs`` (rows ``rows`` of ``rollout``, ``length`` completion columns) split into each
        distinct prompt's prefix, scored once, and the rows' rest
        (`zoo.rollout.scoring.split_prefix`); None scores whole rows: ``score_prefix_once`` off, no
        prompt with two rows, or a setting it cannot serve (`prefix_refusal`)."""
        prompt_of_row = (rows // rollout.num_generations).tolist()
        if not self.score_prefix_once or len(set(prompt_of_row)) == len(prompt_of_row):
            return None
        reason = self.prefix_refusal(model)
        if reason is not None:
            _log_prefix_refusal(reason)
            return None
        prompts = rollout.prompts.select(list(dict.fromkeys(prompt_of_row)))
        return split_prefix(inputs, length, prompt_of_row, prompts, self.scoring_positions(model, inputs))

    def prefix_refusal(self, model: nn.Module) -> str | None:
        """Why a scoring pass of ``model`` cannot continue a cached prefix, or None."""
        from torch.distributed.fsdp import FSDPModule

        if any(isinstance(m, FSDPModule) for m in model.modules()):
            return "FSDP2 (a cached prefix under sharding is not verified)"
        if self.gradient_checkpointing and model.training and torch.is_grad_enabled():
            return "gradient_checkpointing (Hugging Face layers turn the cache off while checkpointing)"
        return None

    def scoring_positions(self, model: nn.Module, inputs: dict) -> Tensor | None:
        """Hook: the position ids ``[..., n, T]`` the model's forward gives ``inputs`` (prompt +
        completion rows) when it computes them itself, so a forward split at any column gets the
        same ones; None when it numbers positions by cache length, which the split continues. Qwen's
        3D rope ids (a model with ``get_rope_index``) come from ``generate``'s own preparation."""
        if not any(hasattr(m, "get_rope_index") for m in (model, getattr(model, "model", None))):
            return None
        return model._prepare_position_ids_for_generation(inputs["input_ids"], dict(inputs))

    def _packed_scores(
        self, model: nn.Module, rollout: Rollout, rows: Tensor, entropy: bool, greedy: bool
    ) -> dict[str, Tensor]:
        """`token_scores` of ``rows`` packed into one sequence (`pack_sequences`,
        `zoo.rollout.packing`), scattered back to ``[n, L]``."""
        inputs = rollout.model_inputs(rows, trim=True)
        length = rollout.completion_columns(rows)
        ids, mask = rollout.completion_ids[rows, :length], rollout.completion_mask[rows, :length]  # [n, length]
        keep = scored_positions(inputs["attention_mask"], mask)  # [K]
        with self.media_once(model, rollout, rows, inputs):
            positions = self.packed_position_ids(model, inputs)
            packed = pack_inputs(inputs, rollout.prompts.media_keys, positions)
            ones = torch.ones(1, len(keep), dtype=torch.bool, device=mask.device)
            scores = score_tokens(
                model,
                packed,
                ids[mask][None],
                ones,
                rollout.temperature,
                self.banned_mask,
                self.score_chunk_tokens,
                entropy,
                keep=keep,
                greedy=greedy,
            )  # [1, K] each
        cut = (0, rollout.completion_ids.shape[1] - length)
        return {k: None if v is None else nn.functional.pad(unpack(v[0], mask), cut) for k, v in scores.items()}

    def media_once(self, model: nn.Module, rollout: Rollout, rows: Tensor, inputs: dict) -> AbstractContextManager:
        """Hook: a context in which ``model(**inputs)`` (rows ``rows`` of ``rollout``) encodes each
        distinct prompt's media once. Shares the ``shared_media`` kinds through Hugging Face's
        ``mm_encoder_outputs`` (`zoo.features.encoded_once`); a family with another media layout can
        override it."""
        if not (self.reuse_media_features and self.shared_media):
            return nullcontext()
        prompt_of_row = (rows // rollout.num_generations).tolist()
        return encoded_once(model, rollout.prompts, prompt_of_row, inputs, self.shared_media)

    def packing_refused(self) -> str | None:
        """Why this model cannot score packed rows (`pack_sequences`), None when it can: the
        attention implementations whose mask or kernel keeps packed rows apart
        (`zoo.rollout.packing.PACKING_ATTENTION`). A family whose own position or mask logic cannot
        be split per row adds its reason."""
        config = self.model.config
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        attention = getattr(config, "_attn_implementation", None)
        if attention not in PACKING_ATTENTION:
            return f"attention {attention!r} does not keep packed rows apart; use one of {PACKING_ATTENTION}"
        return None

    def packed_position_ids(self, model: nn.Module, inputs: dict) -> Tensor:
        """Position ids of the rows of ``inputs`` (padded, with their ``attention_mask``) packed
        into one sequence, each row's as it would be alone: ``[1, total]``, restarting at 0 per row
        (`zoo.rollout.packing.row_positions`). A family with its own positions overrides it."""
        return row_positions(inputs["attention_mask"])


_prefix_refusals: set[str] = set()


def _log_prefix_refusal(reason: str) -> None:
    """Says once per process and reason that scoring passes score whole rows."""
    if reason not in _prefix_refusals:
        _prefix_refusals.add(reason)
        log.warning("score_prefix_once: scoring whole rows under %s (logged once)", reason)
