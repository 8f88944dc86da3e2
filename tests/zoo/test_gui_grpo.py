"""GRPO on the GUI and embodied tasks: a few steps of tiny Qwen2.5-VL on each, from synthetic sources and from
a GUITrajectories file with an unreadable screenshot."""

from functools import partial

import pytest
import torch
from lightning.pytorch import Trainer

from callbacks import GRPOMetrics
from datamodules import GUITrajectories, PretextDataModule, SyntheticGridWorld, SyntheticGUI
from tasks import EmbodiedInverseDynamics, GUIGrounding, GUIInverseDynamics
from tests.datamodules.test_gui_trajectories import shot, write_jsonl
from zoo import GRPOStrategy, QwenVLPolicy

GUI = partial(SyntheticGUI, size=40, width=56, height=84)
CASES = [(GUIInverseDynamics(scales=[1.0, 0.5]), GUI), (GUIGrounding(answer_format="bare"), GUI),
         (EmbodiedInverseDynamics(answer_format="bare"), partial(SyntheticGridWorld, size=40))]


def fit(data: PretextDataModule, steps: int = 2) -> Trainer:
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3))
    trainer = Trainer(max_steps=steps, strategy=GRPOStrategy(num_generations=2, max_new_tokens=4),
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=[GRPOMetrics(summary=False)],
                      num_sanity_val_steps=0, val_check_interval=steps, check_val_every_n_epoch=None)
    trainer.fit(policy, data)
    return trainer


@pytest.mark.parametrize("task, source", CASES, ids=lambda c: getattr(c, "name", ""))
def test_grpo_steps_on_every_gui_task(task, source):
    data = PretextDataModule(source(), task, batch_size=2, val_size=2, epoch_size=4)
    trainer = fit(data)
    logged = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(logged["train/grpo/loss"])
    assert f"train/reward/{task.name}/accuracy" in logged and f"val/{task.name}/accuracy" in logged


def test_an_unreadable_screenshot_is_skipped_and_training_completes(tmp_path, caplog):
    for i in range(4):
        shot(tmp_path / f"{i}.png", 60 * i)
    (tmp_path / "broken.png").write_bytes(b"\x89PNG broken")
    actions = [{"action": "scroll", "direction": "down"}, {"action": "navigate_back"}, {"action": "wait"}]
    rows = [{"screenshots": ["0.png", "1.png", "2.png", "3.png"], "actions": actions},
            {"screenshots": ["3.png", "broken.png"], "actions": [{"action": "wait"}]}]
    source = GUITrajectories(write_jsonl(tmp_path / "episodes.jsonl", rows))
    data = PretextDataModule(source, GUIInverseDynamics(output="letter", answer_format="bare"), batch_size=2,
                             val_size=0, epoch_size=4)
    with caplog.at_level("WARNING"):
        trainer = fit(data)
    assert trainer.global_step == 2 and data.skipped >= 1 and "broken.png" in caplog.text
