"""Any zoo `Task` outside Lightning: datasets and reward functions for TRL ``GRPOTrainer`` and verl.

The ground truth travels in dataset columns as JSON text, written by `example_columns`:

- ``zoo_task``: the task name (``example.task``);
- ``zoo_answer``: ``json.dumps(example.answer)``;
- ``zoo_meta``: ``json.dumps(example.meta)`` (what the verifier needs: permutation, angle, choices,
  ...).

`trl_row` is a TRL conversational row whose images stay where the task put them (an ``{"type":
"image"}`` placeholder per image, the images in an ``images`` column); `trl_reward` scores its
completions. `write_verl_parquet` writes the rows verl's ``RLHFDataset`` reads (``<image>`` /
``<video>`` markers in the prompt text, images as PNG bytes, ``zoo_answer`` in
``reward_model.ground_truth``, the columns in ``extra_info``); `verl_compute_score` scores them.
Pure Python, no Lightning or zoo import; pyarrow is imported only by the writer.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from tasks.base import Example, SelfReward, Task

#: The markers verl's ``RLHFDataset`` replaces by the row's images / videos / audios, in order.
VERL_MARKERS = ("<image>", "<video>", "<audio>")


def example_columns(example: Example) -> dict[str, str]:
    """The dataset columns that let `trl_reward` / `verl_compute_score` verify completions of
    ``example``."""
    return {"zoo_task": example.task, "zoo_answer": json.dumps(example.answer), "zoo_meta": json.dumps(example.meta)}


def verl_fields(example: Example, index: int = 0) -> dict[str, Any]:
    """``data_source``, ``reward_model`` and ``extra_info`` of a verl dataset row for ``example``
    (``index`` is the row number verl reads from ``extra_info``)."""
    columns = example_columns(example)
    return {
        "data_source": example.task,
        "reward_model": {"style": "rule", "ground_truth": columns["zoo_answer"]},
        "extra_info": {**columns, "index": index},
    }


def _parts(message: dict) -> list[dict]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _check_no_tools(task: Task, trainer: str) -> None:
    """A task with tools (`tasks.tools.Toolbox`) is a ValueError: its completions are multi-turn
    transcripts that only zoo's rollouts make (`zoo.rollout.turns`)."""
    if task.toolbox is not None:
        raise ValueError(
            f"{task.name!r} has tools ({', '.join(t.name for t in task.toolbox.tools)}): {trainer} samples one "
            "completion per prompt and cannot run zoo's tools between turns; train it with `zoo fit` "
            "(multi-turn tool rollouts, docs/tools.md), or use the task without its toolbox here"
        )


def _unsupported(example: Example, kind: str, trainer: str) -> ValueError:
    return ValueError(
        f"a {example.task!r} prompt has a {kind!r} part, which a {trainer} dataset row cannot "
        f"carry (see docs/ecosystem.md); train this task with zoo"
    )


def trl_prompt(example: Example) -> tuple[list[dict], list]:
    """TRL conversational messages of ``example`` and its images in order.

    Each image becomes an ``{"type": "image"}`` placeholder where it stands among the text parts;
    TRL fills the placeholders from the ``images`` column in order, so the model sees every image
    between the texts that name it. (With string content TRL puts all images before the text: "Piece
    1:Piece 2:...") Only images: TRL's ``GRPOTrainer`` has no video, audio or point-cloud input (a
    ValueError).
    """
    messages = []
    images = []
    for message in example.messages:
        content = []
        for part in _parts(message):
            if part["type"] == "text":
                content.append({"type": "text", "text": part["text"]})
            elif part["type"] == "image":
                content.append({"type": "image"})
                images.append(part["image"])
            else:
                raise _unsupported(example, part["type"], "TRL")
        messages.append({"role": message["role"], "content": content})
    return messages, images


def trl_row(example: Example) -> dict[str, Any]:
    """A TRL ``GRPOTrainer`` dataset row: ``prompt`` and ``images`` (`trl_prompt`) plus the columns
    `trl_reward` reads."""
    prompt, images = trl_prompt(example)
    return {"prompt": prompt, "images": images, **example_columns(example)}


def _png(picture) -> bytes:
    image = picture if isinstance(picture, Image.Image) else Image.fromarray(np.asarray(picture, np.uint8))
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def _verl_video(part: dict) -> dict[str, Any]:
    """A video as verl hands it to ``qwen_vl_utils``: its frames as PNG data URIs (that reader takes
    paths, URLs or base64 URIs, not bytes) and their rate as ``sample_fps``."""
    frames = [f"data:image/png;base64,{base64.b64encode(_png(frame)).decode()}" for frame in part["video"]]
    return {"video": frames, "sample_fps": float(part["fps"])}


def verl_prompt(example: Example) -> tuple[list[dict], list[dict], list[dict]]:
    """verl chat messages of ``example`` (string content, an ``<image>`` / ``<video>`` marker where
    each medium stands), its images (``{"bytes": PNG}``) and its videos (`_verl_video`), in order.
    Audio and point clouds are a ValueError; so is a text part holding a marker (verl would misplace
    the media)."""
    messages = []
    images = []
    videos = []
    for message in example.messages:
        text = []
        for part in _parts(message):
            kind = part["type"]
            if kind == "text":
                if any(marker in part["text"] for marker in VERL_MARKERS):
                    raise ValueError(
                        f"a {example.task!r} prompt text holds one of {VERL_MARKERS}, which verl "
                        f"would replace by media: {part['text']!r:.80}"
                    )
                text.append(part["text"])
                continue
            if kind == "image":
                images.append({"bytes": _png(part["image"])})
            elif kind == "video":
                videos.append(_verl_video(part))
            else:
                raise _unsupported(example, kind, "verl")
            text.append(f"<{kind}>")
        messages.append({"role": message["role"], "content": "".join(text)})
    return messages, images, videos


def verl_row(example: Example, index: int = 0) -> dict[str, Any]:
    """A verl ``RLHFDataset`` row: ``prompt``, ``images``, ``videos`` (`verl_prompt`) and
    `verl_fields`."""
    prompt, images, videos = verl_prompt(example)
    return {"prompt": prompt, "images": images, "videos": videos, **verl_fields(example, index)}


def write_verl_parquet(examples: Iterable[Example], path: str | Path) -> Path:
    """Write ``examples`` as one verl-ready parquet file (`verl_row` per example, numbered from 0);
    an ``images`` / ``videos`` column no row uses is left out. Holds the rows in memory. Returns the
    path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [verl_row(example, index) for index, example in enumerate(examples)]
    if not rows:
        raise ValueError(f"no examples to write to {path}")
    for key in ("images", "videos"):
        if not any(row[key] for row in rows):
            for row in rows:
                del row[key]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def example_from_columns(task: str, answer: str, meta: str | dict | None) -> Example:
    """The example a verifier needs (no messages) from the columns `example_columns` wrote."""
    try:
        meta = json.loads(meta) if isinstance(meta, str) else dict(meta or {})
        return Example(messages=[], answer=json.loads(answer), task=task, meta=meta)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"zoo columns of a {task!r} row are not the JSON that example_columns writes: "
            f"answer={answer!r:.80}, meta={meta!r:.80}"
        ) from error


def completion_text(completion: str | list[dict]) -> str:
    """A completion as text: TRL passes strings, or for conversational data a list of messages (the
    last message's content: a string or a list of ``{"type": "text", "text": ...}`` parts)."""
    if isinstance(completion, str):
        return completion
    content = completion[-1]["content"] if completion else ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def trl_reward(task: Task, num_generations: int | None = None) -> Callable[..., list[float | None]]:
    """A TRL ``GRPOTrainer`` reward function: ``f(prompts, completions, **columns) -> list[float |
    None]`` returning ``task.verify(...).total``, and None (not applicable) for rows of another
    task, so one function per task scores a mixed dataset. Named ``zoo_<task name>`` (TRL logs
    ``rewards/<name>/mean``).

    A task with a ``self_reward`` (`tasks.MajorityVote`, `tasks.RegionConsistency`) scores each
    prompt's completions against each other (`Task.verify_group`), so pass TRL's
    ``num_generations``: TRL puts a prompt's generations next to each other, and each run of that
    many rows is one group. A call whose rows do not split into runs of one prompt is a ValueError
    (on several processes, make ``per_device_train_batch_size`` times ``steps_per_generation`` a
    multiple of ``num_generations`` so that each process holds whole groups). Pairing rewards
    (`tasks.CoReward`) need a rewrite of each question that no dataset row carries and are
    refused, and so is a task with tools (`Task.toolbox`: TRL cannot run them between turns)."""
    _check_no_tools(task, "TRL's GRPOTrainer")
    _check_self_reward(task, num_generations)

    def reward(
        prompts: list,
        completions: list,
        zoo_answer: list[str],
        zoo_meta: list[str],
        zoo_task: list[str] | None = None,
        **_: Any,
    ) -> list[float | None]:
        names = zoo_task or [task.name] * len(completions)
        rows = list(zip(names, zoo_answer, zoo_meta, [completion_text(c) for c in completions], strict=True))
        if task.self_reward is not None:
            return _group_totals(task, rows, num_generations)
        return [
            task.verify(example_from_columns(name, answer, meta), text).total if name == task.name else None
            for name, answer, meta, text in rows
        ]

    reward.__name__ = reward.__qualname__ = f"zoo_{task.name}"
    return reward


def _check_self_reward(task: Task, num_generations: int | None) -> None:
    if task.self_reward is None:
        return
    if type(task.self_reward).examples is not SelfReward.examples:
        raise ValueError(
            f"{type(task.self_reward).__name__} pairs each question with a rewrite that a TRL dataset "
            "row cannot carry; train it with zoo's GRPO strategy"
        )
    if num_generations is None or num_generations < 2:
        raise ValueError(
            f"trl_reward of a task with a self_reward needs TRL's num_generations (>= 2) to find each "
            f"prompt's group, got {num_generations}"
        )


def _group_totals(task: Task, rows: list[tuple], size: int) -> list[float | None]:
    """Totals of ``rows`` (task, answer, meta, text) scored a group of ``size`` rows at a time; the
    rows of a group must share their columns."""
    if len(rows) % size:
        raise ValueError(f"{len(rows)} completions do not split into groups of num_generations={size}")
    groups = [rows[start : start + size] for start in range(0, len(rows), size)]
    for number, group in enumerate(groups):
        if any(row[:3] != group[0][:3] for row in group):
            first = number * size
            raise ValueError(
                f"rows {first}-{first + size - 1} are not one prompt's {size} generations: a self-reward "
                "needs TRL's consecutive groups, whole on each process"
            )
    mine = [group for group in groups if group[0][0] == task.name]
    rewards = iter(
        task.verify_group(
            [example_from_columns(*group[0][:3]) for group in mine], [[row[3] for row in group] for group in mine]
        )
    )
    totals: list[float | None] = []
    for group in groups:
        totals += [r.total for r in next(rewards)] if group[0][0] == task.name else [None] * size
    return totals


def verl_compute_score(*tasks: Task) -> Callable[..., dict[str, float]]:
    """A verl ``compute_score(data_source, solution_str, ground_truth, extra_info)``: scores a row
    with the task named by its ``data_source`` (with one task, always that task) and returns
    ``{"score": total, **parts}`` (verl logs every key). ``ground_truth`` is the ``zoo_answer`` JSON
    and ``extra_info["zoo_meta"]`` the meta JSON (see `verl_fields`); a ``data_source`` none of
    ``tasks`` is named is a ValueError, and so is a task with a ``self_reward`` (it needs a prompt's
    completions together) or with tools (`Task.toolbox`: verl's single-turn reward path cannot run
    them)."""
    if not tasks:
        raise ValueError("verl_compute_score needs at least one task")
    for task in tasks:
        _check_no_tools(task, "verl's single-turn rollout and compute_score")
    grouped = [task.name for task in tasks if task.self_reward is not None]
    if grouped:  # scored one completion at a time, a self-reward would silently become the labelled reward
        raise ValueError(
            f"verl's compute_score sees one completion at a time, so the self_reward of {grouped} "
            "cannot compare a prompt's completions; use trl_reward(task, num_generations) or zoo's GRPO"
        )
    by_name = {task.name: task for task in tasks}

    def compute_score(
        data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **_: Any
    ) -> dict[str, float]:
        task = tasks[0] if len(tasks) == 1 else by_name.get(data_source)
        if task is None:
            raise ValueError(f"no task named {data_source!r} (the row's data_source) in {sorted(by_name)}")
        meta = (extra_info or {}).get("zoo_meta")
        reward = task.verify(example_from_columns(task.name, ground_truth, meta), solution_str)
        return {"score": reward.total, **reward.parts}

    return compute_score
