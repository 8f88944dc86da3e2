"""Writes sampled rollouts (prompt, answer, completion, reward) to a JSONL file in the run directory, and to
TensorBoard (the media as an image, the completion and reward as text) when a TensorBoard logger is set."""

from __future__ import annotations

import numpy as np
from lightning.pytorch import Callback
from lightning.pytorch.loggers import TensorBoardLogger
from PIL import Image

from callbacks.metrics import JsonlFile, run_path

THUMB_HEIGHT = 128  # pixels of each image / frame in the TensorBoard strip
MAX_FRAMES = 8  # frames of a video shown (evenly spaced)


class RolloutSampler(Callback):
    """Every ``every_n_steps`` training batches (and after each validation) appends up to ``max_rows``
    completions to ``<log_dir>/<filename>``, one JSON object per line. With a TensorBoard logger the same
    rows also go to TensorBoard: ``rollouts/<split>/<row>`` holds the prompt's images / video frames as one
    image strip and a text with the task, answer, reward and completion.

    Args:
        every_n_steps: Training batches between samples; 0 writes none from training.
        max_rows: Completions written per sample (the rows of one training step, or of one validation run).
        filename: File name inside the logger's directory (the trainer's root dir without a logger).
        validation: Also write the first ``max_rows`` validation completions of each validation run.
        max_bytes: Most bytes the file may grow to (a row is about 1-3 KB, most of it the prompt); None: no
            limit. Rows past it are left out of the file (not of TensorBoard), with one warning.
    """

    def __init__(self, every_n_steps: int = 50, max_rows: int = 8, filename: str = "rollouts.jsonl",
                 validation: bool = True, max_bytes: int | None = None):
        self.every_n_steps, self.max_rows = every_n_steps, max_rows
        self.filename, self.validation, self.max_bytes = filename, validation, max_bytes
        self._batches = 0
        self._val_written = 0
        self.file: JsonlFile | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.file = JsonlFile(run_path(trainer, self.filename), self.max_bytes)

    def _write(self, trainer, split: str, outputs: dict, limit: int) -> int:
        rollout, rewards = outputs["rollout"], outputs["rewards"]
        rows = []
        for n in range(min(limit, rollout.size)):
            example = rollout.example(n)
            rows.append({"split": split, "step": trainer.global_step, "task": example.task,
                         "prompt": example.prompt_text, "answer": example.answer,
                         "completion": rollout.completions[n], "reward": rewards[n].total,
                         "parts": rewards[n].parts})
        self.file.append(rows)
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):
                _to_tensorboard(logger.experiment, rows, [rollout.example(n) for n in range(len(rows))])
        return len(rows)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._batches += 1
        due = self.every_n_steps and (self._batches - 1) % self.every_n_steps == 0
        if due and trainer.is_global_zero and outputs and "rollout" in outputs:
            self._write(trainer, "train", outputs, self.max_rows)

    def on_validation_epoch_start(self, trainer, pl_module):
        self._val_written = 0

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        left = self.max_rows - self._val_written
        if self.validation and left > 0 and not trainer.sanity_checking and trainer.is_global_zero and outputs:
            self._val_written += self._write(trainer, "val", outputs, left)


def _to_tensorboard(writer, rows: list[dict], examples: list) -> None:
    for n, (row, example) in enumerate(zip(rows, examples, strict=True)):
        tag = f"rollouts/{row['split']}/{n}"
        strip = media_strip(example)
        if strip is not None:
            writer.add_image(tag, strip, row["step"], dataformats="HWC")
        text = (f"**task** {row['task']} · **reward** {row['reward']:.3f} · **answer** `{row['answer']}`\n\n"
                f"**completion:** `{row['completion']}`")
        writer.add_text(tag, text, row["step"])


def media_strip(example) -> np.ndarray | None:
    """The images and (up to `MAX_FRAMES`) video frames of an example side by side, ``[H, W, 3]`` uint8;
    None for a text-only prompt."""
    pictures = []
    for message in example.messages:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part["type"] == "image":
                pictures.append(part["image"])
            elif part["type"] == "video":
                frames = part["video"]
                keep = np.linspace(0, len(frames) - 1, min(MAX_FRAMES, len(frames))).round().astype(int)
                pictures += [frames[i] for i in keep]
    if not pictures:
        return None
    thumbs = [_thumbnail(p) for p in pictures]
    gap = np.full((THUMB_HEIGHT, 4, 3), 255, np.uint8)
    return np.concatenate([x for thumb in thumbs for x in (thumb, gap)][:-1], axis=1)


def _thumbnail(picture) -> np.ndarray:
    image = picture if isinstance(picture, Image.Image) else Image.fromarray(np.asarray(picture, np.uint8))
    width = max(1, round(image.width * THUMB_HEIGHT / image.height))
    return np.asarray(image.convert("RGB").resize((width, THUMB_HEIGHT)))  # [THUMB_HEIGHT, width, 3]
