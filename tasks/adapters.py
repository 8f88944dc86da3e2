"""Any zoo `Task` as a reward function outside Lightning: TRL ``GRPOTrainer`` and verl ``compute_score``.

The ground truth travels in dataset columns as JSON text, written by `example_columns`:

- ``zoo_task``: the task name (``example.task``);
- ``zoo_answer``: ``json.dumps(example.answer)``;
- ``zoo_meta``: ``json.dumps(example.meta)`` (what the verifier needs: permutation, angle, choices, ...).

A TRL row is ``{"prompt": ..., **example_columns(example)}`` (plus ``image`` / ``images`` for a VLM); a verl
row puts ``zoo_answer`` in ``reward_model.ground_truth`` and the columns in ``extra_info`` (`verl_fields`).
Pure Python, no Lightning or zoo import.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tasks.base import Example, Task


def example_columns(example: Example) -> dict[str, str]:
    """The dataset columns that let `trl_reward` / `verl_compute_score` verify completions of ``example``."""
    return {"zoo_task": example.task, "zoo_answer": json.dumps(example.answer), "zoo_meta": json.dumps(example.meta)}


def verl_fields(example: Example) -> dict[str, Any]:
    """``data_source``, ``reward_model`` and ``extra_info`` of a verl dataset row for ``example``."""
    columns = example_columns(example)
    return {"data_source": example.task, "reward_model": {"style": "rule", "ground_truth": columns["zoo_answer"]},
            "extra_info": columns}


def example_from_columns(task: str, answer: str, meta: str | dict | None) -> Example:
    """The example a verifier needs (no messages) from the columns `example_columns` wrote."""
    try:
        meta = json.loads(meta) if isinstance(meta, str) else dict(meta or {})
        return Example(messages=[], answer=json.loads(answer), task=task, meta=meta)
    except (TypeError, ValueError) as error:
        raise ValueError(f"zoo columns of a {task!r} row are not the JSON that example_columns writes: "
                         f"answer={answer!r:.80}, meta={meta!r:.80}") from error


def completion_text(completion: str | list[dict]) -> str:
    """A completion as text: TRL passes strings, or for conversational data a list of messages (the last
    message's content: a string or a list of ``{"type": "text", "text": ...}`` parts)."""
    if isinstance(completion, str):
        return completion
    content = completion[-1]["content"] if completion else ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def trl_reward(task: Task) -> Callable[..., list[float | None]]:
    """A TRL ``GRPOTrainer`` reward function: ``f(prompts, completions, **columns) -> list[float | None]``
    returning ``task.verify(...).total``, and None (not applicable) for rows of another task, so one
    function per task scores a mixed dataset. Named ``zoo_<task name>`` (TRL logs ``rewards/<name>/mean``)."""

    def reward(prompts: list, completions: list, zoo_answer: list[str], zoo_meta: list[str],
               zoo_task: list[str] | None = None, **_: Any) -> list[float | None]:
        names = zoo_task or [task.name] * len(completions)
        out = []
        for completion, answer, meta, name in zip(completions, zoo_answer, zoo_meta, names, strict=True):
            if name != task.name:
                out.append(None)
                continue
            example = example_from_columns(name, answer, meta)
            out.append(task.verify(example, completion_text(completion)).total)
        return out

    reward.__name__ = reward.__qualname__ = f"zoo_{task.name}"
    return reward


def verl_compute_score(task: Task) -> Callable[..., dict[str, float]]:
    """A verl ``compute_score(data_source, solution_str, ground_truth, extra_info)`` for ``task``: returns
    ``{"score": total, **parts}`` (verl logs every key). ``ground_truth`` is the ``zoo_answer`` JSON and
    ``extra_info["zoo_meta"]`` the meta JSON (see `verl_fields`)."""

    def compute_score(data_source: str, solution_str: str, ground_truth: str,
                      extra_info: dict | None = None, **_: Any) -> dict[str, float]:
        meta = (extra_info or {}).get("zoo_meta")
        reward = task.verify(example_from_columns(task.name, ground_truth, meta), solution_str)
        return {"score": reward.total, **reward.parts}

    return compute_score
