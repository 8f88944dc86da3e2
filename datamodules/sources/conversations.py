"""`Conversations`: labelled chat files (LLaVA-style and ShareGPT / OpenAI-messages-style) as
supervised items, one per assistant turn, with image, video and audio paths confined to the dataset
root."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from datamodules.sources import tables
from datamodules.sources.audio_folder import check_decoding
from datamodules.sources.audio_folder import decode as decode_audio
from datamodules.sources.benchmarks import Benchmark
from datamodules.sources.limits import check_limit
from datamodules.sources.video_folder import check_sampling
from datamodules.sources.video_folder import decode as decode_video
from tasks.mcq import media_part

ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
}
KINDS = ("image", "video", "audio")
_MARKER = re.compile(r"<(image|video|audio)>")
# chat-template control tokens written as text (``<|im_start|>``, ``<|image_pad|>``): a tokenizer
# reads them as the special tokens themselves, which would forge turns or media placeholders
_SPECIAL = re.compile(r"<\|[^<>|\s]{1,40}\|>")


@dataclass
class Dialogue:
    """A conversation up to one assistant turn: what `datamodules.Replies` makes an example of.

    Attributes:
        messages: The chat messages before the reply (system, user and earlier assistant turns),
            media decoded inline as content parts.
        reply: The recorded assistant turn that answers them.
        name: Where it came from (file, row and turn), for logs.
    """

    messages: list[dict]
    reply: str
    name: str = ""


class Conversations(Benchmark):
    """Chat rows as `Dialogue` items: one per assistant turn (each with the whole history before
    it), in file order. Every layout people ship works:

    - LLaVA: ``{"image": "coco/1.jpg", "conversations": [{"from": "human", "value": "<image>\\nWhat
      is it?"}, {"from": "gpt", "value": "A bus."}, ...]}`` (``image`` may be a list; ``video`` and
      ``audio`` likewise);
    - ShareGPT (LLaMA-Factory): ``conversations`` plus ``images`` / ``videos`` / ``audios`` lists
      and an optional ``system``;
    - OpenAI / ms-swift messages: ``{"messages": [{"role": "user", "content": "<image>..."}, ...],
      "images": [...]}``.

    ``<image>``, ``<video>`` and ``<audio>`` markers place the media in the user turns, in order; a
    row without markers shows its media at the start of the first user turn. A row is skipped,
    counted (``skip_reasons``) and logged once when it cannot be used: no conversation, an unknown
    role, turns that do not alternate user / assistant, no assistant turn, markers that do not match
    the media, media in an assistant turn, chat-template control tokens written as text
    (``<|im_start|>``), a media path that is missing or leads outside ``root`` (symlinks included),
    more than ``max_turns`` turns, an image over ``max_image_pixels`` or a line over
    ``max_line_bytes``. Media are decoded when an item is used; one that does not decode skips that
    item (counted by the data module). The items of one conversation share its turns: memory grows
    with the turns of a file, not with their square.

    Args:
        path: A ``.jsonl`` / ``.json`` (a list of rows) / ``.parquet`` file, or a folder of
            ``.parquet`` shards.
        turns: ``all``: an item for every assistant turn; ``last``: only for each conversation's
            last one.
        max_turns: Most turns of one conversation (a system field not counted); a longer one is
            skipped.
        sampling_rate: Audio samples per second.
        clip_seconds: Longest audio clip (its middle); None keeps recordings whole.
        num_frames: Frames per video (None: by ``fps``).
        fps: Video frames per second when ``num_frames`` is None.
        max_frames: Most frames per video.
        max_pixels: Largest video frame area; None keeps the stored size.
        **kwargs: ``root`` (media paths are relative to it and may not leave it; default: the folder
            of ``path``), ``path_format``, ``limit``, ``max_image_pixels`` and ``max_line_bytes``,
            see `datamodules.sources.benchmarks.Benchmark`.
    """

    modality = "conversation"

    def __init__(
        self,
        path: str,
        turns: Literal["all", "last"] = "all",
        max_turns: int = 256,
        sampling_rate: int = 16000,
        clip_seconds: float | None = 30.0,
        num_frames: int | None = 8,
        fps: float | None = None,
        max_frames: int = 64,
        max_pixels: int | None = 256 * 256,
        **kwargs,
    ):
        if turns not in ("all", "last"):
            raise ValueError(f"turns must be 'all' or 'last', got {turns!r}")
        self.max_turns = check_limit(max_turns, "max_turns")
        check_decoding(sampling_rate, clip_seconds)
        self.video_sampling = dict(
            num_frames=num_frames, fps=fps, max_frames=max_frames, max_pixels=max_pixels, trim=0.0
        )
        check_sampling(**self.video_sampling)
        self.turns = turns
        self.sampling_rate = sampling_rate
        self.clip_seconds = clip_seconds
        super().__init__(path, **kwargs)

    def parse(self, row: dict, name: str) -> list[dict]:
        messages = _messages(row, self.max_turns)
        media = {kind: self._refs(row, kind) for kind in KINDS}
        if not any(_MARKER.search(text) for _, text in messages):  # no markers: media open the first user turn
            first = next(i for i, (role, _) in enumerate(messages) if role == "user")
            markers = "".join(f"<{kind}>" for kind in KINDS for _ in media[kind])
            messages[first] = ("user", markers + messages[first][1])
        turns = [_placed(role, text, media) for role, text in messages]
        left = {kind: len(refs) for kind, refs in media.items() if refs}
        if left:
            raise ValueError(f"media mismatch: {left} more media than <image>/<video>/<audio> markers")
        replies = [i for i, (role, text) in enumerate(messages) if role == "assistant" and text.strip()]
        if not replies:
            raise ValueError("no assistant turn: the conversation holds no non-empty assistant reply")
        chosen = replies[-1:] if self.turns == "last" else replies
        # every item holds the same list of turns and where its history ends: a copy each would make
        # memory grow with the square of the turns
        return [{"name": f"{name}#turn{i}", "turns": turns, "upto": i, "reply": messages[i][1].strip()} for i in chosen]

    def _refs(self, row: dict, kind: str) -> list:
        """The media of ``kind`` a row lists (``image`` or ``images``, ...), each bytes or a file in
        the root."""
        for column in (kind, f"{kind}s"):
            if not tables.blank(row.get(column)) and row.get(column) != []:
                refs = self.media(row, column)
                if kind != "image" and any(isinstance(ref, bytes) for ref in refs):
                    raise ValueError(f"bad {kind}: {kind}s must be files, not bytes")
                return refs
        return []

    def __getitem__(self, index: int) -> Dialogue:
        record = self.records[index]
        messages = [
            {"role": role, "content": [self._part(kind, value, record["name"]) for kind, value in parts]}
            for role, parts in record["turns"][: record["upto"]]
        ]
        return Dialogue(messages, record["reply"], record["name"])

    def _part(self, kind: str, value, name: str) -> dict:
        """A content part: text as it is, a media reference decoded (`tasks.SkipItem` when it cannot
        be)."""
        if kind == "text":
            return {"type": "text", "text": value}
        if kind == "image":
            return media_part(self.image(value, name))
        if kind == "video":
            return media_part(decode_video(str(value), **self.video_sampling, max_image_pixels=self.max_image_pixels))
        label = name if isinstance(value, bytes) else str(value)
        return media_part(decode_audio(value, self.sampling_rate, self.clip_seconds, name=label))


def _messages(row: dict, max_turns: int) -> list[tuple[str, str]]:
    """``(role, text)`` of each turn, an optional ``system`` field first; ValueError ``kind:
    detail`` when the row holds no valid conversation, or one of more than ``max_turns`` turns."""
    turns = row.get("conversations", row.get("messages"))
    if not isinstance(turns, list) or not turns:
        raise ValueError("missing conversation: no non-empty 'conversations' or 'messages' list")
    if len(turns) > max_turns:
        raise ValueError(f"too many turns: {len(turns)}, over max_turns={max_turns}")
    messages = [("system", row["system"])] if isinstance(row.get("system"), str) and row["system"].strip() else []
    for turn in turns:
        if not isinstance(turn, dict):
            raise ValueError(f"bad turn: {str(turn)[:80]!r} is not an object")
        role = turn.get("from", turn.get("role"))
        text = turn.get("value", turn.get("content"))
        if role not in ROLES or not isinstance(text, str):
            raise ValueError(f"unknown role: {str(role)[:40]!r} (or its text is not a string)")
        if _SPECIAL.search(text):
            raise ValueError(f"special token text: {_SPECIAL.search(text)[0]!r} in a {role} turn")
        messages.append((ROLES[role], text))
    _check_order([role for role, _ in messages])
    return messages


def _check_order(roles: list[str]) -> None:
    """An optional system turn, then user and assistant turns alternating from a user turn (what
    every chat template accepts)."""
    chat = roles[1:] if roles[0] == "system" else roles
    expected = ["user" if i % 2 == 0 else "assistant" for i in range(len(chat))]
    if chat != expected:
        raise ValueError(f"bad turn order: {chat[:6]} (need user, assistant, user, ... after an optional system)")


def _placed(role: str, text: str, media: dict[str, list]) -> tuple[str, list[tuple[str, object]]]:
    """A turn as ``(role, parts)``: its text pieces and, at each marker, the next reference of that
    kind in ``media`` (consumed)."""
    pieces = _MARKER.split(text)  # text, kind, text, kind, ..., text
    if len(pieces) > 1 and role != "user":
        raise ValueError(f"media outside a user turn: a {role} turn holds a media marker")
    parts: list[tuple[str, object]] = []
    for i, piece in enumerate(pieces):
        if i % 2 and not media[piece]:
            raise ValueError(f"media mismatch: more <{piece}> markers than {piece}s")
        if i % 2:
            parts.append((piece, media[piece].pop(0)))
        elif piece.strip():
            parts.append(("text", piece.strip("\n")))
    return role, parts or [("text", "")]
