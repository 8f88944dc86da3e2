"""GRPO on RGB-D: every depth task on a tiny Qwen2.5-VL, from an RGB-D folder with a broken
frame."""

from functools import partial

import numpy as np
import pytest
import torch
from PIL import Image

from datamodules import PretextDataModule, RGBDFolder
from tasks import DepthOrder, RegionalDepthOrder, RelativePosition3D
from tests.helpers import grpo_fit, make_item
from zoo import QwenVLPolicy

DEPTH_TASKS = [
    DepthOrder(points=3, answer_format="bare"),
    RegionalDepthOrder(answer_format="bare"),
    RelativePosition3D(answer_format="bare"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Six frames of the sample room written as JPEG + 16-bit PNG (millimetres) + intrinsics, and
    one frame whose depth map is corrupt."""
    root = tmp_path_factory.mktemp("rgbd")
    (root / "rgb").mkdir(), (root / "depth").mkdir()
    for seed in range(6):
        item = make_item("rgbd", seed)
        Image.fromarray(item.rgb).save(root / "rgb" / f"{seed}.jpg", quality=95)
        millimetres = np.nan_to_num(item.depth * 1000, nan=0).round().astype(np.uint16)
        Image.fromarray(millimetres).save(root / "depth" / f"{seed}.png")
        fx, cx, cy = item.intrinsics[0, 0], item.intrinsics[0, 2], item.intrinsics[1, 2]
    (root / "intrinsics.json").write_text(f'{{"fx": {fx}, "fy": {fx}, "cx": {cx}, "cy": {cy}}}')
    Image.fromarray(make_item("rgbd").rgb).save(root / "rgb" / "broken.jpg")
    (root / "depth" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 200)
    return root


def fit(data: PretextDataModule, steps: int = 2):
    torch.manual_seed(0)
    return grpo_fit(QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3)), data, steps)


def test_grpo_steps_on_every_depth_task_skipping_a_broken_frame(folder, caplog):
    data = PretextDataModule(RGBDFolder(str(folder)), DEPTH_TASKS, batch_size=4, val_size=2, epoch_size=8)
    with caplog.at_level("WARNING"):
        trainer = fit(data)
    logged = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(logged["train/grpo/loss"])
    for task in DEPTH_TASKS:  # 8 training examples drawn from 3 tasks (seed 0 draws each at least once)
        assert f"train/reward/{task.name}/accuracy" in logged
    # the broken frame sorts last, so it is held out for validation: skipped there, counted, logged
    # once
    assert data.skipped >= 1 and sum("broken.jpg" in r.getMessage() for r in caplog.records) == 1
