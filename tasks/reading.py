"""How a task reads a completion: where the answer is looked for and what the format part pays for.

zoo's default is strict: the whole completion must follow the answer format, and ``format`` pays
only for a valid answer. The papers' reward code is more lenient in different ways (docs/tasks.md,
"Paper-exact reward semantics"), so a reproduction can read completions as its paper does:

- ``answer_search``: ``strict`` (the whole completion), ``first`` or ``last`` (the first or last
  ``<answer>...</answer>`` / ``\\boxed{...}`` anywhere, after the think block when it is required).
- ``format_pays``: ``valid_answer`` (the whole completion follows the format and states a valid
  answer), ``pattern`` (the whole completion has the format's layout, whatever it holds) or
  ``found`` (an answer block is somewhere in it).
- ``require_think``: whether the answer is only read after a ``<think>...</think>`` block.
- ``last_letter``: read a lettered answer as its last capital letter, case-insensitively.

Every reading here is linear in the length of the completion: no pattern can backtrack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tasks import answers

SEARCHES = ("strict", "first", "last")
FORMAT_PAYS = ("valid_answer", "pattern", "found")
AnswerSearch = Literal["strict", "first", "last"]
FormatPays = Literal["valid_answer", "pattern", "found"]
_BOX = "\\boxed{"


@dataclass(frozen=True)
class Reading:
    """A task's answer-format options (see `tasks.Task`), checked once; `answer`, `strict_answer`
    and `shaped` read completions with them."""

    answer_format: str
    think: bool
    require_think: bool
    answer_search: AnswerSearch = "strict"
    format_pays: FormatPays = "valid_answer"
    last_letter: bool = False

    def __post_init__(self):
        if self.answer_format not in answers.FORMATS:
            raise ValueError(f"answer_format must be one of {answers.FORMATS}, got {self.answer_format!r}")
        answers.instruction(self.answer_format, self.think)  # rejects impossible combinations (bare + think) early
        if self.answer_search not in SEARCHES:
            raise ValueError(f"answer_search must be one of {SEARCHES}, got {self.answer_search!r}")
        if self.format_pays not in FORMAT_PAYS:
            raise ValueError(f"format_pays must be one of {FORMAT_PAYS}, got {self.format_pays!r}")
        if self.require_think and not self.think:
            raise ValueError("require_think=True needs think=True: the prompt must ask for the think block")
        lenient = self.answer_search != "strict" or self.format_pays != "valid_answer"
        if lenient and self.answer_format == "bare":
            raise ValueError("answer_search and format_pays other than the defaults need answer_format tags or boxed")

    @property
    def strict(self) -> bool:
        """Whether the answer is read the way the format part reads it (zoo's default), so one
        reading serves both."""
        return self.answer_search == "strict" and self.require_think == self.think and not self.last_letter

    def answer(self, completion: str) -> str | None:
        """The answer the accuracy is scored on: non-empty and holding no format tag, or None."""
        if self.answer_search == "strict":
            answer, _ = answers.extract(completion, self.answer_format, self.require_think)
        else:
            answer = _search(completion, self.answer_format, self.require_think, self.answer_search)
            answer = None if not answer or answers.format_tag(answer) else answer
        return last_capital(answer) if self.last_letter and answer is not None else answer

    def strict_answer(self, completion: str) -> str | None:
        """The answer of a completion that follows the format as a whole (with its think block when
        ``think``), or None: what ``format_pays: valid_answer`` checks."""
        return answers.extract(completion, self.answer_format, self.think)[0]

    def shaped(self, completion: str) -> bool:
        """Whether the completion earns the format part without looking at its answer
        (``format_pays`` ``pattern`` or ``found``)."""
        if self.format_pays == "found":
            start = _body_start(completion, self.think)
            return start is not None and _blocks(completion[start:], self.answer_format, "first") != []
        return pattern(completion, self.answer_format, self.think)


def last_capital(answer: str) -> str:
    """Jigsaw-R1's letter reading: the last capital letter of the answer; else, for a lone small
    letter, that letter in capitals; else the answer as it is (which then names no option)."""
    for char in reversed(answer):
        if "A" <= char <= "Z":
            return char
    text = answer.strip()
    return text.upper() if len(text) == 1 and "a" <= text <= "z" else answer


def pattern(completion: str, answer_format: str, think: bool) -> bool:
    """Whether the whole completion (not stripped) has the format's layout, whatever the answer:
    ``tags``: ``<think>...</think>`` (when ``think``), blanks, then ``<answer>...</answer>``;
    ``boxed``: ``<think>...</think>`` (when ``think``), then text holding ``\\boxed{...}`` (a ``}``
    after the box; Spatial-SSRL's and Visual Jigsaw's pattern)."""
    start = 0
    if think:
        if not completion.startswith("<think>"):
            return False
        close = completion.find("</think>", len("<think>"))
        if close < 0:
            return False
        start = close + len("</think>")
    if answer_format == "boxed":
        box = completion.find(_BOX, start)
        return box >= 0 and completion.find("}", box + len(_BOX)) >= 0
    if think:
        found = answers.THINK_THEN_ANSWER.search(completion, len("<think>"))
        start = found.end() if found else -1
    elif completion.startswith("<answer>"):
        start = len("<answer>")
    else:
        start = -1
    return 0 <= start <= len(completion) - len("</answer>") and completion.endswith("</answer>")


def _body_start(completion: str, think: bool) -> int | None:
    """Where the text after a required think block starts (0 when none is required)."""
    return answers.after_think(completion) if think else 0


def _search(completion: str, answer_format: str, think: bool, which: str) -> str | None:
    """The first or last answer block anywhere after the (required) think block, stripped."""
    start = _body_start(completion, think)
    if start is None:
        return None
    found = _blocks(completion[start:], answer_format, which)
    return found[0] if found else None


def _blocks(text: str, answer_format: str, which: str) -> list[str]:
    """The first (``which="first"``) or last answer block of ``text`` as a one-item list, or ``[]``.
    Tags are taken as ``re.finditer(r"<answer>(.*?)</answer>", DOTALL)`` takes them, boxes as
    mathruler's ``extract_boxed_content`` (balanced braces; the last box is the one after the last
    ``\\boxed{``)."""
    if answer_format == "boxed":
        box = text.find(_BOX) if which == "first" else text.rfind(_BOX)
        content = answers.boxed_content(text, box + len(_BOX)) if box >= 0 else None
        return [] if content is None else [content]
    blocks, position = [], 0
    while (start := text.find("<answer>", position)) >= 0:
        end = text.find("</answer>", start + len("<answer>"))
        if end < 0:
            break
        blocks.append(text[start + len("<answer>") : end].strip())
        if which == "first":
            break
        position = end + len("</answer>")
    return blocks[-1:]


#: A line of at least this many words, repeated more than `REPEATED_RUN` times in a row, is a
#: degenerate loop (Visual Jigsaw's ``has_excessive_repetition(min_len=7, max_run=3)``).
REPEATED_WORDS = 7
REPEATED_RUN = 3


def repeats_lines(text: str) -> bool:
    """Whether a line of at least `REPEATED_WORDS` words comes more than `REPEATED_RUN` times in a
    row (compared case-insensitively, stripped; blank lines are passed over, a shorter line breaks
    the run)."""
    previous = None
    run = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if len(line.split()) < REPEATED_WORDS:
            previous = None
            run = 0
            continue
        key = line.lower()
        run = run + 1 if key == previous else 1
        previous = key
        if run > REPEATED_RUN:
            return True
    return False
