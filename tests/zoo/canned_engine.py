"""A second rollout engine for tests: canned completions instead of a model, selected purely by
config (``model.init_args.engine``), recording what the policy asks of it."""

from __future__ import annotations

import hashlib
import json

from zoo.rollout.engine import Prompts, RolloutEngine, Sampling, full_weights


def constant_prompt(uid: str) -> bool:
    """Whether every sample of the prompt with this uid is the same text (half of the uids, by
    hash)."""
    return hashlib.sha256(str(uid).encode()).digest()[0] % 2 == 0


class CannedEngine(RolloutEngine):
    """Sample g of a prompt is ``texts[g % len(texts)]``, or ``texts[0]`` for every g of a
    `constant_prompt` (so its group's rewards are equal), tokenized by the policy's tokenizer and
    ended by an EOS.

    Args:
        texts: The completions.
        log: JSON lines file of the calls (``bind``, ``sync`` with the step and a checksum of the
            weights it was given, ``generate`` with its rows, ``offload``); None records nothing.
        end_with_eos: False leaves the EOS out (a contract violation the policy must refuse).
    """

    def __init__(self, texts: list[str] | None = None, log: str | None = None, end_with_eos: bool = True):
        self.texts, self.log, self.end_with_eos = texts or ["A", "B", "C", "D"], log, end_with_eos

    def _record(self, event: str, **fields) -> None:
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(json.dumps({"event": event, **fields}) + "\n")

    def bind(self, policy) -> None:
        super().bind(policy)
        self._record("bind")

    def sync_weights(self, policy) -> None:
        checksum = sum(float(t.double().sum()) for _, t in full_weights(policy))
        step = policy._trainer.global_step if policy._trainer is not None else None
        self._record("sync", step=step, checksum=checksum)

    def offload(self) -> None:
        self._record("offload")

    def text(self, uid: str, g: int) -> str:
        """Sample g of the prompt with this uid."""
        return self.texts[0] if constant_prompt(uid) else self.texts[g % len(self.texts)]

    def generate(self, prompts: Prompts, n: int, sampling: Sampling) -> list[list[int]]:
        self._record("generate", rows=len(prompts.examples) * n)
        tokenizer, tail = self.policy.tokenizer, [sampling.eos_ids[0]] if self.end_with_eos else []
        return [
            tokenizer(self.text(ex.uid, g), add_special_tokens=False)["input_ids"] + tail
            for ex in prompts.examples
            for g in range(n)
        ]
