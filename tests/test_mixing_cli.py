"""A mixed-task run from a config: per-task rewards and held-out accuracy are logged, and a
curriculum switches task options mid-run and is saved in the checkpoint."""

import csv
import json

import torch

from tests.test_cli import run_dir, zoo

CONFIG = """
model:
  class_path: zoo.QwenVLPolicy
  init_args: {pretrained: "tiny:qwen2_5_vl"}
data:
  class_path: datamodules.PretextDataModule
  init_args:
    source: {class_path: datamodules.SyntheticScenes, init_args: {image_size: 56}}
    tasks:
      - {class_path: tasks.Rotation, init_args: {labels: letters, answer_format: bare}}
      - {class_path: tasks.JigsawPair, init_args: {rows: 2, cols: 1, answer_format: bare}}
      - {class_path: tasks.FlippedPatch, init_args: {labels: false, answer_format: bare}}
    weights: [1, 2, 1]
    batch_size: 6
    val_size: 6
trainer:
  max_steps: 4
  val_check_interval: 4
  log_every_n_steps: 1
  strategy: {class_path: zoo.grpo.GRPOStrategy, init_args: {num_generations: 2, max_new_tokens: 3}}
  callbacks:
    - class_path: callbacks.Curriculum
      init_args:
        stages:
          - {step: 2, tasks: {jigsaw_pair: {rows: 1, cols: 2}}, weights: [1, 1, 1]}
rollouts: {every_n_steps: 1, max_rows: 12, validation: false}
"""


def test_mixed_tasks_log_per_task_rewards_and_the_curriculum_switches(tmp_path):
    (tmp_path / "mixed.yaml").write_text(CONFIG)
    result = zoo("fit", "--config", "mixed.yaml", cwd=tmp_path)
    with open(run_dir(tmp_path) / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    names = set(rows[0])
    for task in ("rotation", "jigsaw_pair", "flipped_patch"):
        assert {f"train/reward/{task}/accuracy", f"train/reward/{task}/format", f"val/{task}/accuracy"} <= names
    assert "train/reward/flipped_patch/patch" in names
    assert "curriculum stage 1 begins at training example 12" in result.stderr
    (ckpt,) = (run_dir(tmp_path) / "checkpoints").glob("*.ckpt")
    callbacks = torch.load(ckpt, map_location="cpu", weights_only=True)["callbacks"]
    (state,) = [v for k, v in callbacks.items() if k.startswith("Curriculum")]
    assert state["starts"] == [12]
    rollouts = [json.loads(line) for line in (run_dir(tmp_path) / "rollouts.jsonl").read_text().splitlines()]
    # rollouts are logged after the optimizer step: batch b carries step b + 1
    grids = {(r["step"] >= 3, "2 rows by 1 column" in r["prompt"]) for r in rollouts if r["task"] == "jigsaw_pair"}
    assert grids == {(False, True), (True, False)}  # 2x1 puzzles in batches 0-1, 1x2 from batch 2 on
