"""A toy tool (`Look`), a task that uses it and a scripted rollout engine, for the multi-turn tests
(importable by the subprocesses of the distributed ones)."""

from __future__ import annotations

import torch
from PIL import Image

from tasks import Rotation
from tasks.tools.base import Call, Tool, Toolbox, ToolError
from zoo.rollout.engine import Prompts, RolloutEngine, Sampling
from zoo.rollout.hf import HFEngine


class Look(Tool):
    """``<look>k</look>``: a k-pixel-wide grey image; k = 9 is refused, k = 8 crashes."""

    name = "look"
    syntax = "<look>k</look>"

    def parse(self, arguments: str) -> tuple:
        if not arguments.strip().isdigit():
            raise ToolError(f"not a number: {arguments!r}")
        return (int(arguments),)

    def run(self, call: Call, example) -> list[dict]:
        (k,) = call.args
        if k == 9:
            raise ToolError("k = 9 is out of the image")
        if k == 8:
            raise RuntimeError("a bug in the tool")
        return [{"type": "image", "image": Image.new("RGB", (28 * k, 28), (100, 100, 100))}]


BOX = Toolbox((Look(),), max_turns=2)

# what sample g writes at each turn (turn 1 only for rows still going)
SCRIPT = {
    0: ["<look>1</look>", "B", "<look>x</look>", "<look>2</look>"],
    1: {0: "A", 3: "<look>1</look>"},
}


class Scripted(RolloutEngine):
    """Writes `SCRIPT`: the turn is read from the example's uid (``.../g/turnT`` after turn 0).

    Args:
        by_rank: Instead, every sample of rank 0 calls the tool and then answers ``A``, every
            sample of the other ranks answers ``B`` at once: ranks hold different numbers of turns.
    """

    def __init__(self, by_rank: bool = False):
        self.by_rank = by_rank

    def sync_weights(self, policy) -> None:
        return None

    def offload(self) -> None:
        return None

    def text(self, uid: str, g: int) -> str:
        later = "/turn" in uid
        if self.by_rank:
            calls = not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0
            return "A" if later else ("<look>1</look>" if calls else "B")
        if later:
            _, sample, _ = uid.rsplit("/", 2)
            return SCRIPT[1][int(sample)]
        return SCRIPT[0][g]

    def generate(self, prompts: Prompts, n: int, sampling: Sampling) -> list[list[int]]:
        out = []
        for ex in prompts.examples:
            for g in range(n):
                text = self.text(ex.uid, g)
                ids = self.policy.tokenizer(text, add_special_tokens=False)["input_ids"]
                out.append((ids + [sampling.eos_ids[0]])[: sampling.max_new_tokens])
        return out


class LookRotation(Rotation):
    """Rotation with the `Look` tool (two turns)."""

    toolbox = BOX


class CallsFirst(HFEngine):
    """The policy's own seeded sampling, except that the first turn of every even sample is a
    `Look` call: the later turns of those rows are sampled by the model under the tool's result."""

    def generate(self, prompts: Prompts, n: int, sampling: Sampling) -> list[list[int]]:
        sampled = super().generate(prompts, n, sampling).tolist()  # [N, L]
        if any("/turn" in ex.uid for ex in prompts.examples):
            return sampled
        call = self.policy.tokenizer("<look>1</look>", add_special_tokens=False)["input_ids"] + [sampling.eos_ids[0]]
        return [call if row % n % 2 == 0 else ids for row, ids in enumerate(sampled)]
