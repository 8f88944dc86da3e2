"""Writes sampled rollouts (prompt, media, answer, completion, reward) to a JSONL file in the run
directory and to every TensorBoard, Weights & Biases and MLflow logger of the run."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch
from lightning.pytorch import Callback
from lightning.pytorch.loggers import MLFlowLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_warn

from callbacks.metrics import JsonlFile, run_path
from callbacks.rollout_media import audio_track, media_strip, tool_results, tool_strip, wav_bytes
from zoo.rollout.turns import MultiTurnRollout

#: Columns of the W&B and MLflow rollout tables (``media``: the image strip, ``audio``: the audio
#: track, ``tools``: the strip of what a multi-turn row's tools returned).
COLUMNS = ("step", "task", "prompt", "media", "audio", "completion", "tools", "reward", "answer")


class RolloutSampler(Callback):
    """Every ``every_n_steps`` training batches writes up to ``max_rows`` completions, spread over
    the batch's prompts: row ``r`` is completion ``r // B`` of prompt ``r % B`` (B prompts of G
    completions), so the rows show ``min(B, max_rows)`` different prompts. Each validation run
    writes its first ``max_rows`` completions (gathered over its batches) when it ends. Rows go to:

    - ``<log_dir>/<filename>``: one JSON object per row (split, step, row, uid and sample as in
      `callbacks.Predictions`, task, prompt, answer, completion, reward, parts); a row of a
      multi-turn rollout (a task with tools, `zoo.rollout.turns`) also has ``turns`` (each turn's
      ``text`` and whether it was a tool ``call``), ``calls`` and ``invalid`` (it ended on an
      invalid action), its ``completion`` being the transcript;
    - TensorBoard: ``rollouts/<split>/<row>`` is the prompt's media as one image strip (images,
      video frames, spectrograms, point-cloud views: `callbacks.rollout_media.media_strip`) and a
      text with the task, reward, answer, prompt and completion (each turn of a multi-turn row);
      ``rollouts/<split>/<row>/audio`` the prompt's audio; ``rollouts/<split>/<row>/tools`` the
      pictures a multi-turn row's tools returned, as one strip
      (`callbacks.rollout_media.tool_strip`);
    - Weights & Biases: a table ``rollouts/<split>`` per write, one line per row, the strips as
      images and the audio as audio (`COLUMNS`);
    - MLflow: the same lines appended to the artifact table ``rollouts/<split>.json`` (strips as
      table images, audio as WAV artifacts under ``rollouts/<split>/`` named in the ``audio``
      column).

    Args:
        every_n_steps: Training batches between samples; 0 writes none from training.
        max_rows: Completions written per sample (the rows of one training step, or of one
            validation run).
        filename: File name inside the logger's directory (the trainer's root dir without a logger).
        validation: Also write the first ``max_rows`` validation completions of each validation run.
        max_bytes: Most bytes the file may grow to (a row is about 1-3 KB, most of it the prompt);
            None: no limit. Rows past it are left out of the file (not of the loggers), with one
            warning.
    """

    def __init__(
        self,
        every_n_steps: int = 50,
        max_rows: int = 8,
        filename: str = "rollouts.jsonl",
        validation: bool = True,
        max_bytes: int | None = None,
    ):
        self.every_n_steps = every_n_steps
        self.max_rows = max_rows
        self.filename = filename
        self.validation = validation
        self.max_bytes = max_bytes
        self._batches = 0
        self._val: list[tuple[dict, object, list]] = []  # (row, example, tool results) of this validation run
        self.file: JsonlFile | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.file = JsonlFile(run_path(trainer, self.filename), self.max_bytes)

    def _rows(self, trainer, split: str, outputs: dict, limit: int, first: int = 0) -> list[tuple[dict, object, list]]:
        """(JSONL row, example, its tools' result messages) of up to ``limit`` completions
        (`spread_rows`), numbered from ``first``."""
        rollout = outputs["rollout"]
        rewards = outputs["rewards"]
        sampled = []
        for i, n in enumerate(spread_rows(len(rollout.examples), rollout.num_generations, limit)):
            example = rollout.example(n)
            turns, results = _turns(rollout, n)
            sampled.append(
                (
                    {
                        "split": split,
                        "step": trainer.global_step,
                        "row": first + i,
                        "uid": example.uid,
                        "sample": n % rollout.num_generations,
                        "task": example.task,
                        "prompt": example.prompt_text,
                        "answer": example.answer,
                        "completion": rollout.completions[n],
                        "reward": rewards[n].total,
                        "parts": rewards[n].parts,
                    }
                    | turns,
                    example,
                    results,
                )
            )
        return sampled

    def _write(self, trainer, split: str, sampled: list[tuple[dict, object, list]]) -> None:
        rows = [row for row, _, _ in sampled]
        media = None
        self.file.append(rows)
        writers = [(logger, write) for logger in trainer.loggers for kind, write in WRITERS if isinstance(logger, kind)]
        for logger, write in writers:
            try:  # a logger's outage (or odd media) must not end the run; the rows are in the JSONL
                media = media or [(media_strip(ex), audio_track(ex), tool_strip(tools)) for _, ex, tools in sampled]
                write(logger, split, rows, media)
            except Exception as error:
                rank_zero_warn(
                    f"RolloutSampler: {type(logger).__name__} did not take the {split} rollouts of "
                    f"step {trainer.global_step}: {error!r}"
                )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._batches += 1
        due = self.every_n_steps and (self._batches - 1) % self.every_n_steps == 0
        if due and trainer.is_global_zero and outputs and "rollout" in outputs:
            self._write(trainer, "train", self._rows(trainer, "train", outputs, self.max_rows))

    def on_validation_epoch_start(self, trainer, pl_module):
        self._val = []

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        left = self.max_rows - len(self._val)
        if self.validation and left > 0 and not trainer.sanity_checking and trainer.is_global_zero and outputs:
            self._val += self._rows(trainer, "val", outputs, left, first=len(self._val))

    def on_validation_epoch_end(self, trainer, pl_module):
        if self._val:  # one table per validation run, not one per batch
            self._write(trainer, "val", self._val)
        self._val = []


def spread_rows(num_prompts: int, num_generations: int, limit: int) -> list[int]:
    """Rollout rows (``prompt * G + completion``) to show: the first completion of every prompt,
    then the second of every prompt, ..., the first ``limit`` of them."""
    order = [b * num_generations + g for g in range(num_generations) for b in range(num_prompts)]
    return order[:limit]


def _turns(rollout, n: int) -> tuple[dict, list[dict]]:
    """Row ``n``'s ``turns``, ``calls`` and ``invalid`` for its JSONL row, and the user messages its
    tools added to its conversation (`callbacks.rollout_media.tool_results`); nothing for a
    single-turn rollout."""
    if not isinstance(rollout, MultiTurnRollout):
        return {}, []
    taken = rollout.row_turns(n)
    calls = int(rollout.calls[n])
    # a row goes on only after a call, so its turns are calls up to the last, which is one when
    # the row ran out of turns or budget right after it (calls then counts every turn)
    turns = [{"text": text, "call": t < calls} for t, (text, _) in enumerate(taken)]
    results = tool_results(taken[-1][1].messages, rollout.example(n).messages)
    return {"turns": turns, "calls": calls, "invalid": bool(rollout.invalid[n])}, results


def _text(row: dict) -> str:
    head = f"**task** {row['task']} · **reward** {row['reward']:.3f} · **answer** `{row['answer']}`\n\n"
    head += f"**prompt:** `{row['prompt']}`\n\n"
    if "turns" not in row:
        return head + f"**completion:** `{row['completion']}`"
    turns = [
        f"**turn {t}{' (call)' if turn['call'] else ''}:** `{turn['text']}`" for t, turn in enumerate(row["turns"])
    ]
    ending = f"{row['calls']} calls" + (", ended on an invalid action" if row["invalid"] else "")
    return head + "\n\n".join([*turns, ending])


def _to_tensorboard(logger, split: str, rows: list[dict], media: list[tuple]) -> None:
    writer = logger.experiment
    for row, (strip, track, tools) in zip(rows, media, strict=True):
        tag = f"rollouts/{split}/{row['row']}"
        if strip is not None:
            writer.add_image(tag, strip, row["step"], dataformats="HWC")
        if tools is not None:
            writer.add_image(f"{tag}/tools", tools, row["step"], dataformats="HWC")
        if track is not None:
            writer.add_audio(f"{tag}/audio", torch.from_numpy(track[0])[None], row["step"], sample_rate=track[1])
        writer.add_text(tag, _text(row), row["step"])


def _table_row(row: dict, strip, audio, tools) -> list:
    return [
        row["step"],
        row["task"],
        row["prompt"],
        strip,
        audio,
        row["completion"],
        tools,
        row["reward"],
        json.dumps(row["answer"], default=str),
    ]


def _to_wandb(logger, split: str, rows: list[dict], media: list[tuple]) -> None:
    import wandb

    data = []
    for row, (strip, track, tools) in zip(rows, media, strict=True):
        data.append(
            _table_row(
                row,
                None if strip is None else wandb.Image(strip),
                None if track is None else wandb.Audio(track[0], sample_rate=track[1]),
                None if tools is None else wandb.Image(tools),
            )
        )
    logger.log_table(f"rollouts/{split}", columns=list(COLUMNS), data=data, step=rows[0]["step"])


def _to_mlflow(logger, split: str, rows: list[dict], media: list[tuple]) -> None:
    import mlflow

    client = logger.experiment
    run_id = logger.run_id
    data = []
    with tempfile.TemporaryDirectory() as tmp:
        for row, (strip, track, tools) in zip(rows, media, strict=True):
            audio = None
            if track is not None:  # the table holds paths; the WAV files are artifacts beside it
                wav = Path(tmp) / f"step{row['step']:07d}_{row['row']}.wav"
                wav.write_bytes(wav_bytes(*track))
                client.log_artifact(run_id, str(wav), artifact_path=f"rollouts/{split}")
                audio = f"rollouts/{split}/{wav.name}"
            pictures = [None if picture is None else mlflow.Image(picture) for picture in (strip, tools)]
            data.append(_table_row(row, pictures[0], audio, pictures[1]))
    client.log_table(
        run_id, data={c: [r[i] for r in data] for i, c in enumerate(COLUMNS)}, artifact_file=f"rollouts/{split}.json"
    )


#: Logger class -> writer of rows and their (`media_strip`, `audio_track`, `tool_strip`)
#: (isinstance: subclasses too).
WRITERS = ((TensorBoardLogger, _to_tensorboard), (WandbLogger, _to_wandb), (MLFlowLogger, _to_mlflow))
