"""GRPO on the GUI and embodied tasks: a few steps of tiny Qwen2.5-VL on each, from synthetic
sources and from a GUITrajectories file with an unreadable screenshot."""

from functools import partial

import pytest
import torch

from datamodules import GUITrajectories, PretextDataModule, SyntheticGridWorld, SyntheticGUI
from tasks import EmbodiedInverseDynamics, GUIGrounding, GUIInverseDynamics
from tests.datamodules.test_gui_trajectories import shot, write_jsonl
from tests.helpers import grpo_fit
from zoo import QwenVLPolicy

GUI = partial(SyntheticGUI, size=40, width=56, height=84)
CASES = [
    (GUIInverseDynamics(scales=[1.0, 0.5]), GUI),
    (GUIGrounding(answer_format="bare"), GUI),
    (EmbodiedInverseDynamics(answer_format="bare"), partial(SyntheticGridWorld, size=40)),
]


def fit(data: PretextDataModule, steps: int = 2):
    torch.manual_seed(0)
    return grpo_fit(QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3)), data, steps)


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
    rows = [
        {"screenshots": ["0.png", "1.png", "2.png", "3.png"], "actions": actions},
        {"screenshots": ["3.png", "broken.png"], "actions": [{"action": "wait"}]},
    ]
    source = GUITrajectories(write_jsonl(tmp_path / "episodes.jsonl", rows))
    data = PretextDataModule(
        source, GUIInverseDynamics(output="letter", answer_format="bare"), batch_size=2, val_size=0, epoch_size=4
    )
    with caplog.at_level("WARNING"):
        trainer = fit(data)
    assert trainer.global_step == 2 and data.skipped >= 1 and "broken.png" in caplog.text
