"""Tools a policy calls between the turns of a multi-turn rollout ("thinking with images").

A turn is what the policy writes up to its end-of-turn token. `read_turn` says what a turn is: a
call of one of the task's tools (the turn holds the tool's tag), the final answer (no tool tag), or
an invalid action (a tool tag that does not parse strictly). A call is run by its tool against the
example (`Tool.run`), and what it returns (images, frames, text) becomes the next user message of
that row's conversation; the row then writes its next turn, up to the task's ``max_turns``.

A row's transcript, what its task's verifier reads, is its turns joined by `TURN_BREAK`
(`transcript`, `turns_of`). Every loop over turns (the rollout, SFT demonstrations, `zoo preview`)
builds the conversation with `replay`, so all of them show the policy the same messages.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

#: Joins the turns of a transcript; a turn never contains it (`read_turn` refuses one that does).
TURN_BREAK = "\n<tool_result/>\n"

_THINK = re.compile(r"\s*(?:<think>.*?</think>\s*)?", re.DOTALL)


class ToolError(ValueError):
    """A call the tool refuses (a malformed argument, a degenerate box, a time past the video's
    end): the row's turn ends as an invalid action, which earns no reward."""


@dataclass(frozen=True)
class Call:
    """A parsed tool call: the tool's name and its arguments as `Tool.parse` read them."""

    tool: str
    args: tuple


@dataclass(frozen=True)
class Action:
    """What a turn is.

    Attributes:
        kind: ``"answer"`` (the turn holds no tool tag: the row is done and its task verifies it),
            ``"call"`` (one well-formed call: the tool runs and the row continues) or ``"invalid"``
            (the row is done and earns nothing).
        call: The call, for ``"call"``.
        reason: Why the action is invalid, for logs.
    """

    kind: Literal["answer", "call", "invalid"]
    call: Call | None = None
    reason: str = ""


class Tool(ABC):
    """A tool the policy can call: ``<name>ARGUMENTS</name>`` in its turn, alone after an optional
    ``<think>`` block.

    Subclasses set ``name`` (the tag) and ``syntax`` (how a call is written, shown in the task's
    prompt) and implement `parse` and `run`. A tool holds no state between calls, so a rollout is a
    function of its seeds.
    """

    name: str
    syntax: str

    @abstractmethod
    def parse(self, arguments: str) -> tuple:
        """The arguments of a call from the text between the tags; `ToolError` when malformed."""

    @abstractmethod
    def run(self, call: Call, example: Any) -> list[dict]:
        """The call's result as chat content parts (``{"type": "image", "image": PIL.Image}``,
        ``{"type": "video", ...}``, ``{"type": "text", "text": ...}``) for ``example`` (a
        `tasks.Example`); `ToolError` when the call cannot be run on it."""


@dataclass(frozen=True)
class Toolbox:
    """The tools of a task and how many turns a row may take (the last one must answer).

    Attributes:
        tools: The callable tools; their tags must differ.
        max_turns: Turns per row, the answer's included (>= 2 for a tool to be of use).
        turn_tokens: New tokens per turn (None: the strategy's ``max_new_tokens`` bounds each turn
            and the row's total).
    """

    tools: tuple[Tool, ...]
    max_turns: int = 2
    turn_tokens: int | None = None

    def __post_init__(self):
        names = [tool.name for tool in self.tools]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"a toolbox needs tools with distinct names, got {names}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.turn_tokens is not None and self.turn_tokens < 1:
            raise ValueError(f"turn_tokens must be >= 1, got {self.turn_tokens}")


def read_turn(text: str, tools: tuple[Tool, ...]) -> Action:
    """What the turn ``text`` is (see `Action`). A call is strict: an optional ``<think>`` block,
    then exactly one ``<name>...</name>`` of a known tool, then nothing but whitespace."""
    if TURN_BREAK.strip() in text:
        return Action("invalid", reason="the turn writes the tool-result marker")
    tagged = [tool for tool in tools if f"<{tool.name}>" in text or f"</{tool.name}>" in text]
    if not tagged:
        return Action("answer")
    if len(tagged) > 1:
        return Action("invalid", reason=f"calls {len(tagged)} tools in one turn")
    tool = tagged[0]
    start = _THINK.match(text).end()
    body = re.fullmatch(rf"<{tool.name}>(.*?)</{tool.name}>\s*", text[start:], re.DOTALL)
    if body is None or f"<{tool.name}>" in body.group(1):
        return Action("invalid", reason=f"a {tool.name} call must be <{tool.name}>...</{tool.name}> and nothing else")
    try:
        return Action("call", Call(tool.name, tool.parse(body.group(1))))
    except ToolError as error:
        return Action("invalid", reason=f"{tool.name}: {error}")


def run_call(call: Call, tools: tuple[Tool, ...], example: Any) -> list[dict]:
    """The result of ``call`` as content parts; `ToolError` when the tool refuses it or fails (any
    exception of the tool: a tool bug ends the row, never the run)."""
    tool = next(t for t in tools if t.name == call.tool)
    try:
        return tool.run(call, example)
    except ToolError:
        raise
    except Exception as error:  # noqa: BLE001  (a tool's bug ends the row as an invalid action)
        raise ToolError(f"{tool.name} failed: {type(error).__name__}: {error}") from error


def tool_message(parts: list[dict]) -> dict:
    """The user message that shows a tool's result."""
    return {"role": "user", "content": parts}


def replay(messages: list[dict], turns: list[str], tools: tuple[Tool, ...], example: Any) -> list[dict]:
    """``messages`` followed by each of ``turns`` (the policy's texts) as an assistant message and,
    after each call turn, the tool's result as a user message: the conversation the policy sees
    before its next turn. Stops after the first turn that is not a well-formed call (its assistant
    message included); `ToolError` from a call propagates."""
    out = list(messages)
    for text in turns:
        out.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        action = read_turn(text, tools)
        if action.kind != "call":
            break
        out.append(tool_message(run_call(action.call, tools, example)))
    return out


def transcript(turns: list[str]) -> str:
    """The text a verifier reads: the turns joined by `TURN_BREAK`."""
    return TURN_BREAK.join(turns)


def turns_of(completion: str) -> list[str]:
    """The turns of a transcript (a single-turn completion is one turn)."""
    return completion.split(TURN_BREAK)
