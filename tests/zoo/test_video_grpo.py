"""GRPO on video: every video task on tiny Qwen2.5-VL and Qwen3-VL, and a video folder with a
corrupt file."""

from functools import partial

import pytest
import torch

pytest.importorskip("decord")
pytest.importorskip("av")

from datamodules import PretextDataModule, SyntheticVideos, VideoFolder  # noqa: E402
from tasks import AnomalyGrounding, ArrowOfTime, ObjectCounting, TemporalJigsaw  # noqa: E402
from tests.datamodules.test_video_folder import clip, write  # noqa: E402
from tests.helpers import grpo_fit
from zoo import QwenVLPolicy  # noqa: E402

VIDEO_TASKS = [
    TemporalJigsaw(clips=2, answer_format="bare"),
    AnomalyGrounding(min_len=2, max_len=4),
    ObjectCounting(min_gap=2),
    ArrowOfTime(labels="letters", answer_format="bare"),
]


def fit(checkpoint: str, data: PretextDataModule, steps: int = 2):
    torch.manual_seed(0)
    policy = QwenVLPolicy(checkpoint, optimizer=partial(torch.optim.AdamW, lr=1e-3))
    return grpo_fit(policy, data, steps, entropy_coef=0.01)


@pytest.mark.parametrize("task", VIDEO_TASKS, ids=lambda t: t.name)
@pytest.mark.parametrize("checkpoint", ["tiny:qwen2_5_vl", "tiny:qwen3_vl"])
def test_grpo_steps_on_every_video_task(checkpoint, task, tmp_path):
    source = SyntheticVideos(size=40, num_frames=16, height=48, width=48, root=str(tmp_path))
    data = PretextDataModule(source, task, batch_size=2, val_size=2, epoch_size=4)
    trainer = fit(checkpoint, data)
    logged = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(logged["train/grpo/loss"])
    assert f"train/reward/{task.name}/accuracy" in logged and f"val/{task.name}/accuracy" in logged


def test_a_corrupt_video_is_skipped_and_training_completes(tmp_path, caplog):
    for i in range(6):
        write(tmp_path / f"ok{i}.mp4", clip(12), fps=4)
    (tmp_path / "broken.mp4").write_bytes(b"\x00not a video" * 100)
    data = PretextDataModule(
        VideoFolder(str(tmp_path), num_frames=8),
        ArrowOfTime(answer_format="bare"),
        batch_size=2,
        val_size=0,
        epoch_size=14,
    )
    with caplog.at_level("WARNING"):
        trainer = fit("tiny:qwen2_5_vl", data, steps=3)
    assert trainer.global_step == 3
    assert data.skipped >= 1
    assert "broken.mp4" in caplog.text
