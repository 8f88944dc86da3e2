"""Multi-turn rollouts: the policy calls a tool (crop, zoom, seek), sees its result, then goes on.

Each row writes a turn (up to its end-of-turn token); `tasks.tools.read_turn` says what the turn is.
A well-formed call runs its tool, whose result becomes the next user message of *that row's*
conversation, and the row writes another turn; an answer, an invalid action, a tool that refuses
the call, an exhausted token budget or the task's ``max_turns`` ends the row. Rows end at different
turns.

Each turn is sampled, and later scored, as one single-turn `Rollout` whose prompt is the row's
conversation so far, encoded by the policy exactly as the sampler saw it. So the log-prob of every
token the policy wrote is taken under the very input it was sampled from, and the tokens of the
templates and tool results are never scored at all: a `MultiTurnRollout` lays each row's turns end
to end in its ``[N, L]`` completion tensors, which the loss reads like any other rollout's. The
first turn is the plain rollout of the B prompts (prefix sharing applies); turn ``t`` of row
``(b, g)`` is seeded by ``(seed, uid of b, g, t)`` and positions restart at 0 in each turn, so
rollouts stay the same on any number of ranks and after a resume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from tasks.tools.base import Toolbox, ToolError, read_turn, replay, transcript
from zoo.rollout.rollout import Rollout


@dataclass
class Turn:
    """One turn of a multi-turn rollout.

    Attributes:
        rollout: The turn as a single-turn rollout: its prompts are the conversations of the rows
            that took it (turn 0: the B prompts, G samples each; later turns: one prompt per row).
        rows: The rollout rows ``[n]`` that took the turn, in ``rollout``'s row order.
        offsets: Where each one's tokens start in the row's completion columns ``[n]``.
    """

    rollout: Rollout
    rows: Tensor
    offsets: Tensor


@dataclass
class MultiTurnRollout(Rollout):
    """A `Rollout` whose completions are several turns with tool results between them.

    ``completion_ids`` / ``completion_mask`` hold each row's turns end to end (each through its
    end-of-turn token), ``completions`` their transcripts (`tasks.tools.transcript`), which the
    task verifies.

    Attributes:
        turns: The turns, first to last; a later turn holds only the rows still going.
        calls: Tool calls each row made ``[N]``.
        invalid: Rows that ended on an invalid action (a malformed call, a refused one) ``[N]``.
    """

    turns: list[Turn] = field(default_factory=list)
    calls: Tensor | None = None
    invalid: Tensor | None = None

    def model_inputs(self, rows: Tensor, trim: bool = False) -> dict[str, Tensor]:
        raise TypeError("a multi-turn rollout is scored turn by turn (zoo.rollout.turns.score_turns)")

    def prompt_tokens(self) -> Tensor:
        """Prompt tokens each row's scoring passes read, over all its turns ``[N]`` (padding left
        out): what a token budget counts besides the completion."""
        out = torch.zeros(self.size, dtype=torch.long)
        for turn in self.turns:
            if len(turn.rows):
                per_prompt = turn.rollout.prompts.tensors["attention_mask"].sum(1).cpu()  # [prompts]
                out[turn.rows] += per_prompt[torch.arange(len(turn.rows)) // turn.rollout.num_generations]
        return out

    def turns_taken(self) -> Tensor:
        """Turns each row took ``[N]``."""
        counts = torch.zeros(self.size, dtype=torch.long)
        for turn in self.turns:
            counts[turn.rows.cpu()] += 1
        return counts

    def row_turns(self, row: int) -> list[tuple[str, object]]:
        """The turns row ``row`` took: each one's text and the example it was sampled from (whose
        messages are the conversation before it, tool results included)."""
        out = []
        for turn in self.turns:
            taken = (turn.rows == row).nonzero().flatten().tolist()
            if taken:
                out.append((turn.rollout.completions[taken[0]], turn.rollout.example(taken[0])))
        return out


@dataclass
class _Row:
    """What the sampling loop tracks of one row."""

    messages: list[dict]
    budget: int
    turns: list[str] = field(default_factory=list)
    calls: int = 0
    done: bool = False
    invalid: bool = False


def sample_batch(policy, datamodule, examples: list, num_generations: int, **options) -> Rollout:
    """`sample_turns` when the data module has a task with tools (`datamodules.PretextDataModule`'s
    ``uses_tools``; decided by the data module, not the batch, so every rank runs the same loop),
    else the policy's single-turn `sample`; ``options`` as `sample_turns` takes them."""
    boxes = toolboxes(datamodule, examples)
    if boxes is None:
        options.pop("any_rank", None)
        return policy.sample(examples, num_generations, **options)
    return sample_turns(policy, examples, num_generations, boxes, max_turns=datamodule.max_turns, **options)


def toolboxes(datamodule, examples: list) -> list[Toolbox | None] | None:
    """Each example's toolbox when the data module has a task with tools, else None."""
    if not getattr(datamodule, "uses_tools", False):
        return None
    return [datamodule.toolbox(example) for example in examples]


def sample_turns(
    policy,
    examples: list,
    num_generations: int,
    toolboxes: list[Toolbox | None],
    *,
    max_new_tokens: int,
    max_turns: int | None = None,
    any_rank: Callable[[bool], bool] = bool,
    **sampling,
) -> MultiTurnRollout:
    """``num_generations`` multi-turn rollouts of each example.

    Args:
        policy: A `zoo.PolicyModule`; each turn is its `sample`.
        examples: The B prompts.
        num_generations: G.
        toolboxes: Each example's tools and turn limits (None: it answers in one turn).
        max_new_tokens: Tokens a row may write over all its turns (a toolbox's ``turn_tokens``
            bounds each turn too).
        max_turns: Turns the loop may run, the same on every rank (the data module's largest
            ``max_turns``); None: the largest of ``toolboxes``.
        any_rank: Whether any rank still has a row going, given whether this one has (a collective
            under several processes, so every rank samples the same number of turns; a rank with
            none left samples a stand-in turn that is thrown away).
        **sampling: `zoo.PolicyModule.sample`'s options (``temperature``, ``top_p``, ``greedy``,
            ``seed``, ``share_prefix``); one seed serves every turn.
    """
    g = num_generations
    if not sampling.get("greedy") and sampling.get("seed") is None:
        sampling["seed"] = int(torch.randint(0, 2**62, ()))
    rows = [_Row(list(examples[n // g].messages), max_new_tokens) for n in range(len(examples) * g)]
    limits = [box.max_turns if box else 1 for box in toolboxes]
    turns: list[Turn] = []
    for t in range(max_turns or max(limits)):
        going = [n for n, row in enumerate(rows) if not row.done]
        if t > 0 and not any_rank(bool(going)):
            break
        if t > 0 and not going:
            _stand_in(policy, examples, sampling)
            turns.append(_empty_turn(turns[0].rollout))
            continue
        cap = max(rows[n].budget for n in going)
        caps = [box.turn_tokens for n in going if (box := toolboxes[n // g]) and box.turn_tokens]
        limit = min([cap, *caps])
        if t == 0:
            rollout = policy.sample(examples, g, max_new_tokens=limit, **sampling)
        else:
            asked = [_turn_example(examples[n // g], rows[n].messages, n % g, t) for n in going]
            rollout = policy.sample(asked, 1, max_new_tokens=limit, **sampling)
        rollout = _cut_to_budgets(policy, rollout, [rows[n].budget for n in going])
        offsets = torch.tensor([max_new_tokens - rows[n].budget for n in going], dtype=torch.long)
        turns.append(Turn(rollout, torch.tensor(going, dtype=torch.long), offsets))
        for i, n in enumerate(going):
            box = toolboxes[n // g]
            _advance(rows[n], rollout, i, box, examples[n // g], last=t + 1 >= limits[n // g])
    return _assemble(policy, examples, g, rows, turns, max_new_tokens)


def _turn_example(example, messages: list[dict], sample: int, turn: int):
    """The example a later turn samples: the row's conversation so far, seeded by (uid, sample,
    turn) through its uid."""
    return replace(example, messages=messages, uid=f"{example.uid}/{sample}/turn{turn}")


def _stand_in(policy, examples: list, sampling: dict) -> None:
    """A one-token turn of the first example whose tokens are thrown away: this rank's share of a
    turn the other ranks still sample (their gathers of sharded weights need a partner)."""
    policy.sample(examples[:1], 1, max_new_tokens=1, **sampling)


def _empty_turn(first: Rollout) -> Turn:
    none = torch.zeros(0, dtype=torch.long)
    return Turn(first, none, none)


def _cut_to_budgets(policy, rollout: Rollout, budgets: list[int]) -> Rollout:
    """``rollout`` with each row cut to its remaining token budget (a row with less budget than
    the turn's limit: its tokens past the cut are dropped, as if sampling had stopped there)."""
    over = [i for i, (n, b) in enumerate(zip(rollout.completion_mask.sum(1).tolist(), budgets, strict=True)) if n > b]
    if not over:
        return rollout
    ids, mask, truncated = rollout.completion_ids.clone(), rollout.completion_mask.clone(), rollout.truncated.clone()
    texts = list(rollout.completions)
    for i in over:
        b = budgets[i]
        ids[i, b:], mask[i, b:], truncated[i] = policy.eos_ids[0], False, True
        texts[i] = policy.tokenizer.decode(rollout.completion_ids[i, :b])
    return replace(rollout, completion_ids=ids, completion_mask=mask, truncated=truncated, completions=texts)


def _advance(row: _Row, rollout: Rollout, i: int, box: Toolbox | None, example, last: bool) -> None:
    """Record row ``i`` of a turn's ``rollout`` and decide whether the row goes on: a well-formed
    call with turns and budget left runs its tool and extends the conversation."""
    text = rollout.completions[i]
    row.turns.append(text)
    row.budget -= int(rollout.completion_mask[i].sum())
    row.done = True
    if box is None or bool(rollout.truncated[i]):
        return
    action = read_turn(text, box.tools)
    if action.kind == "invalid":
        row.invalid = True
        return
    if action.kind != "call":
        return
    row.calls += 1
    if last or row.budget <= 0:  # a call with no turn left to use it: the task scores the transcript
        return
    try:
        row.messages = replay(row.messages, [text], box.tools, example)
    except ToolError:
        row.invalid = True
        return
    row.done = False


def _assemble(policy, examples: list, g: int, rows: list[_Row], turns: list[Turn], width: int) -> MultiTurnRollout:
    """The sampled rollout: every row's turns laid end to end."""
    return lay_out(
        examples,
        g,
        turns,
        [transcript(row.turns) for row in rows],
        policy.eos_ids[0],
        calls=torch.tensor([row.calls for row in rows]),
        invalid=torch.tensor([row.invalid for row in rows]),
    )


def lay_out(examples: list, g: int, turns: list[Turn], completions: list[str], eos: int, **more) -> MultiTurnRollout:
    """The multi-turn rollout of ``turns``: each row's counted tokens of every turn at its offsets
    in ``[N, L]`` completion tensors (padded with ``eos``); ``more`` sets `MultiTurnRollout`'s
    other fields."""
    first = turns[0].rollout
    device = first.completion_ids.device
    ends = [t.offsets + t.rollout.completion_mask.sum(1).cpu() for t in turns if len(t.rows)]
    length = max(int(torch.cat(ends).max()), 1)
    ids = torch.full((len(completions), length), eos, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    truncated = torch.zeros(len(completions), dtype=torch.bool, device=device)
    for turn in (t for t in turns if len(t.rows)):  # an empty turn: this rank's stand-in
        local, column = turn.rollout.completion_mask.nonzero(as_tuple=True)  # counted tokens of the turn
        rows, columns = turn.rows.to(device)[local], turn.offsets.to(device)[local] + column
        ids[rows, columns] = turn.rollout.completion_ids[local, column]
        mask[rows, columns] = True
        truncated[turn.rows.to(device)] = turn.rollout.truncated  # a later turn overrides
    return MultiTurnRollout(
        examples=list(examples),
        prompts=first.prompts,
        num_generations=g,
        completion_ids=ids,
        completion_mask=mask,
        truncated=truncated,
        completions=completions,
        temperature=first.temperature,
        turns=turns,
        **more,
    )


def score_turns(
    rollout: MultiTurnRollout, rows: Tensor, score: Callable[[Rollout, Tensor], dict], lockstep: bool = False
) -> dict:
    """``score`` (a policy's single-turn `token_scores`) of ``rows`` of a multi-turn rollout, turn
    by turn, laid out as the rollout's ``[n, L]`` completion columns (0 outside them); the values
    keep their graph, so a loss over them trains every turn.

    ``lockstep`` (FSDP2: every forward gathers weights with the other ranks) scores a stand-in row
    of the first turn, weighted 0, for each turn none of ``rows`` took, so every rank runs as many
    forward and backward passes."""
    where = {int(r): i for i, r in enumerate(rows.tolist())}
    shape = (len(rows), rollout.completion_ids.shape[1])
    out: dict = {}
    tie = 0.0
    for turn in rollout.turns:
        local = [i for i, r in enumerate(turn.rows.tolist()) if r in where]
        if not local:
            if lockstep:
                first = rollout.turns[0].rollout
                tie = (
                    tie
                    + 0.0
                    * score(first, torch.zeros(1, dtype=torch.long, device=first.completion_ids.device))["logps"].sum()
                )
            continue
        picked = torch.tensor(local, dtype=torch.long)
        scores = score(turn.rollout, picked.to(turn.rollout.completion_ids.device))  # each [k, L_t]
        counted = turn.rollout.completion_mask[picked]  # [k, L_t]
        k, column = counted.nonzero(as_tuple=True)
        dest = torch.tensor([where[int(turn.rows[local[j]])] for j in k.tolist()], dtype=torch.long)
        cols = turn.offsets[picked][k] + column.cpu()
        for key, value in scores.items():
            if value is None:
                out[key] = None
                continue
            base = out.get(key)
            base = torch.zeros(shape, dtype=value.dtype, device=value.device) if base is None else base
            out[key] = base.index_put((dest.to(value.device), cols.to(value.device)), value[k, column])
    out["logps"] = out["logps"] + tie
    return out
