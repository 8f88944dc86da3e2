"""Demonstrations as completions: an expert's reply tokenised as the policy would generate it after
its prompt.

A demonstration becomes a one-sample `zoo.rollout.Rollout` (`teacher_forced`), so every family's own
encode and scoring path (`zoo.PolicyModule.token_scores`) gives its teacher-forced log-probs: the
prompt, its media placeholders and its padding are never trained, only the completion tokens through
the end-of-turn token. The same rows can join a GRPO group as off-policy samples.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from tasks.tools.base import replay, turns_of
from zoo.rollout.rollout import Rollout
from zoo.rollout.turns import Turn, lay_out


def _text_only(messages: list[dict], as_parts: bool) -> list[dict]:
    """The messages with their media left out (the end of the assistant turn does not depend on
    them), as text parts for a processor's template or as strings for a tokenizer's."""
    out = []
    for message in messages:
        content = message["content"]
        text = content if isinstance(content, str) else "".join(p["text"] for p in content if p["type"] == "text")
        out.append({"role": message["role"], "content": [{"type": "text", "text": text}] if as_parts else text})
    return out


def completion_text(policy, messages: list[dict], reply: str) -> str:
    """What the policy writes after the prompt of ``messages`` when its answer is ``reply``: the
    chat template's rendering of the assistant turn (any decoration the template adds and the
    end-of-turn token), or ``reply`` plus the EOS token when the template's full rendering does not
    extend its generation prompt.

    Args:
        policy: A configured `zoo.PolicyModule` (its processor's chat template is used).
        messages: The prompt's chat messages.
        reply: The assistant's answer.
    """
    processor = policy.processor
    prompt = _text_only(messages, as_parts=hasattr(processor, "tokenizer"))  # a processor, not a tokenizer
    turn = _text_only([{"role": "assistant", "content": reply}], as_parts=hasattr(processor, "tokenizer"))
    start = processor.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    full = processor.apply_chat_template(prompt + turn, tokenize=False)
    if full.startswith(start) and len(full) > len(start):
        return full[len(start) :]
    return reply + policy.tokenizer.decode(policy.eos_ids[:1])


def completion_ids(policy, text: str, max_tokens: int | None = None) -> tuple[list[int], bool]:
    """The token ids of a completion text through its first EOS token (one is added when it has
    none), cut to ``max_tokens``; and whether it was cut."""
    ids = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
    ends = [i for i, token in enumerate(ids) if token in policy.eos_ids]
    ids = ids[: ends[0] + 1] if ends else [*ids, policy.eos_ids[0]]
    cut = max_tokens is not None and len(ids) > max_tokens
    return (ids[:max_tokens] if cut else ids), cut


def demonstration_ids(
    policy,
    examples: list,
    replies: list[str],
    max_tokens: int | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Right-padded completion ids of the demonstrations of a batch.

    A demonstration holding a token the policy may never emit (a media placeholder, as a literal
    ``<|image_pad|>`` in the text tokenises) is left out: its row keeps no token in the mask and is
    flagged.

    Args:
        policy: A configured `zoo.PolicyModule`.
        examples: B `tasks.Example` prompts.
        replies: The B demonstrations (assistant answers).
        max_tokens: Longest completion kept; longer ones are cut (and flagged truncated). None keeps
            all.

    Returns:
        ``ids`` ``[B, L]`` (padded with an EOS id, as rollouts are), ``mask`` ``[B, L]`` bool (the
        tokens trained), ``truncated`` ``[B]`` bool, ``dropped`` ``[B]`` bool.
    """
    rows = [
        completion_ids(policy, completion_text(policy, ex.messages, reply), max_tokens)
        for ex, reply in zip(examples, replies, strict=True)
    ]
    banned = set(policy.banned_ids)
    dropped = torch.tensor([bool(banned.intersection(ids)) for ids, _ in rows])  # [B]
    length = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), length), policy.eos_ids[0], dtype=torch.long)  # [B, L]
    mask = torch.zeros(len(rows), length, dtype=torch.bool)  # [B, L]
    for b, (row, _) in enumerate(rows):
        if not dropped[b]:
            ids[b, : len(row)] = torch.tensor(row)
            mask[b, : len(row)] = True
    return ids, mask, torch.tensor([cut for _, cut in rows]), dropped


def teacher_forced(
    policy,
    examples: list,
    replies: list[str],
    max_tokens: int | None = None,
    toolboxes: list | None = None,
) -> tuple[Rollout, Tensor]:
    """The demonstrations of a batch as a one-sample rollout (``G = 1``, temperature 1), ready for
    `zoo.PolicyModule.token_scores`; and the ``[B]`` rows left out (see `demonstration_ids`).

    With ``toolboxes`` (each example's `tasks.tools.Toolbox`, None for a one-turn task) a reply is a
    transcript: its turns are teacher-forced one by one after the conversation the tools make of
    the turns before (`tasks.tools.replay`), as a multi-turn rollout samples them;
    ``max_tokens`` bounds each turn."""
    if toolboxes is None:
        return _one_turn(policy, examples, replies, max_tokens)
    turns_by_row = [turns_of(reply) if box else [reply] for reply, box in zip(replies, toolboxes, strict=True)]
    turns, dropped = [], torch.zeros(len(examples), dtype=torch.bool)
    written = torch.zeros(len(examples), dtype=torch.long)  # tokens of each row's turns so far
    for t in range(max(len(row) for row in turns_by_row)):
        rows = [b for b, row in enumerate(turns_by_row) if len(row) > t]
        asked = [_after(examples[b], turns_by_row[b][:t], toolboxes[b]) for b in rows]
        rollout, left_out = _one_turn(policy, asked, [turns_by_row[b][t] for b in rows], max_tokens)
        dropped[rows] |= left_out
        turns.append(Turn(rollout, torch.tensor(rows), written[rows].clone()))
        written[rows] += rollout.completion_mask.sum(1).cpu()
    return lay_out(examples, 1, turns, list(replies), policy.eos_ids[0]), dropped


def _after(example, turns: list[str], box):
    """``example`` asked after ``turns``: its conversation with their tool results."""
    return example if not turns else replace(example, messages=replay(example.messages, turns, box.tools, example))


def _one_turn(policy, examples: list, replies: list[str], max_tokens: int | None) -> tuple[Rollout, Tensor]:
    ids, mask, truncated, dropped = demonstration_ids(policy, examples, replies, max_tokens)
    prompts = policy.encode(examples).to(policy.device)
    rollout = Rollout(
        examples=list(examples),
        prompts=prompts,
        num_generations=1,
        completion_ids=ids.to(policy.device),
        completion_mask=mask.to(policy.device),
        truncated=truncated.to(policy.device),
        completions=list(replies),
        temperature=1.0,
    )
    return rollout, dropped
