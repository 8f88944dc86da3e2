"""Bad data never stops a run and is never silent. For every file-reading source, a folder mixes
good files with corrupt, truncated, zero-byte and misnamed ones: every bad file is skipped, counted
by source and kind and logged once with its path; training on all of them at once completes and logs
``data/skipped``; a source whose items are all bad fails fast, naming them."""

import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from lightning.pytorch import Trainer
from PIL import Image

from callbacks import GRPOMetrics
from datamodules import (
    AudioFolder,
    GUITrajectories,
    ImageFolder,
    PointCloudFolder,
    PretextDataModule,
    RGBDFolder,
    SyntheticVideos,
    VideoFolder,
)
from tasks import ArrowOfTime, AudioSpeed, DepthOrder, GUIInverseDynamics, PointCloudRotation, Rotation
from tests.helpers import make_item
from zoo import GRPOStrategy, QwenVLPolicy

open3d = pytest.importorskip("open3d", exc_type=ImportError)


def spoil(folder: Path, good: Path, suffix: str) -> list[Path]:
    """Three bad files of a kind beside the good ones: random bytes, zero bytes, the first half of a
    good file (truncated); plus a text file wearing the kind's extension (misnamed)."""
    folder.mkdir(parents=True, exist_ok=True)
    bad = {
        f"corrupt{suffix}": bytes(random.Random(0).randrange(256) for _ in range(300)),
        f"empty{suffix}": b"",
        f"truncated{suffix}": good.read_bytes()[: len(good.read_bytes()) // 2],
        f"notes{suffix}": b"a text file\n",
    }
    for name, data in bad.items():
        (folder / name).write_bytes(data)
    return [folder / name for name in bad]


def images(root: Path) -> tuple[ImageFolder, list[Path]]:
    root.mkdir(parents=True)
    for i in range(6):
        make_item("image", i).save(root / f"good{i}.jpg")
    bad = spoil(root, root / "good0.jpg", ".jpg")
    return ImageFolder(str(root)), bad


def videos(root: Path) -> tuple[VideoFolder, list[Path]]:
    synthetic = SyntheticVideos(size=4, num_frames=8, height=32, width=32, root=str(root))
    for i in range(len(synthetic)):
        synthetic[i]  # writes its mp4 into root
    good = sorted(root.rglob("*.mp4"))
    bad = spoil(root, good[0], ".mp4")
    return VideoFolder(str(root), num_frames=8), bad


def rgbd(root: Path) -> tuple[RGBDFolder, list[Path]]:
    for folder in ("rgb", "depth"):
        (root / folder).mkdir(parents=True)
    for i in range(5):
        item = make_item("rgbd", i)
        Image.fromarray(item.rgb).save(root / "rgb" / f"f{i}.png")
        np.save(root / "depth" / f"f{i}.npy", item.depth)
    bad = spoil(root / "depth", root / "depth" / "f0.npy", ".npy")
    for path in bad:  # each bad depth map gets a colour image, so the pair is an item
        Image.fromarray(make_item("rgbd", 0).rgb).save(root / "rgb" / f"{path.stem}.png")
    return RGBDFolder(str(root), fov=60.0), bad


def point_clouds(root: Path) -> tuple[PointCloudFolder, list[Path]]:
    root.mkdir(parents=True)
    for i in range(5):
        cloud = open3d.geometry.PointCloud(open3d.utility.Vector3dVector(make_item("point_cloud", i).points[:, :3]))
        open3d.io.write_point_cloud(str(root / f"good{i}.ply"), cloud)
    bad = spoil(root, root / "good0.ply", ".ply")
    return PointCloudFolder(str(root), num_points=128), bad


def audio(root: Path) -> tuple[AudioFolder, list[Path]]:
    import soundfile

    root.mkdir(parents=True)
    for i in range(5):
        clip = make_item("audio", i)
        soundfile.write(root / f"good{i}.wav", clip.waveform, clip.sampling_rate)
    bad = spoil(root, root / "good0.wav", ".wav")
    return AudioFolder(str(root), clip_seconds=2.0), bad


def gui(root: Path) -> tuple[GUITrajectories, list[Path]]:
    (root / "shots").mkdir(parents=True)
    for i in range(6):
        make_item("image", i).save(root / "shots" / f"{i}.png")
    bad = spoil(root / "shots", root / "shots" / "0.png", ".png")
    actions = [{"action_type": "navigate_home"}, {"action_type": "wait"}, {"action_type": "navigate_back"}]
    rows = [
        {"episode_id": e, "screenshots": [f"shots/{2 * e}.png", f"shots/{2 * e + 1}.png"], "actions": [actions[e]]}
        for e in range(3)
    ]
    rows += [
        {"episode_id": 10 + k, "screenshots": ["shots/0.png", f"shots/{p.name}"], "actions": [actions[0]]}
        for k, p in enumerate(bad)
    ]
    rows += [
        {"episode_id": 20, "screenshots": ["shots/0.png", "../outside.png"], "actions": [actions[0]]},
        {"episode_id": 21, "screenshots": ["shots/0.png"]},
        "{not json",
    ]
    path = root / "episodes.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return GUITrajectories(str(path)), bad


KINDS = {  # source builder, a task of its modality (a Qwen-VL policy takes all but audio)
    "images": (images, lambda: Rotation(labels="letters", answer_format="bare")),
    "videos": (videos, lambda: ArrowOfTime(answer_format="bare")),
    "rgbd": (rgbd, lambda: DepthOrder(points=2, min_gap=0.3, answer_format="bare")),
    "point_clouds": (point_clouds, lambda: PointCloudRotation(render=True, answer_format="bare")),
    "gui": (
        gui,
        lambda: GUIInverseDynamics(
            output="letter", answer_format="bare", action_types=["navigate_home", "wait", "navigate_back"]
        ),
    ),
    "audio": (audio, lambda: AudioSpeed(speeds=[0.5, 2.0], answer_format="bare")),
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_bad_file_is_skipped_counted_and_logged_once(tmp_path, caplog, kind):
    build, task = KINDS[kind]
    source, bad = build(tmp_path / kind)
    data = PretextDataModule(source, task(), batch_size=len(source), val_size=0)
    data.setup("fit")
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # two epochs: skipped again, logged once
            list(data.train_dataloader())
    name = type(source).__name__
    unreadable = data.skip_counts.get((name, "unreadable"), 0)
    assert unreadable >= 2 * len(bad), data.skip_counts
    for path in bad:
        assert sum(path.name in r.getMessage() for r in caplog.records) == 1, (path.name, caplog.text[-2000:])


def test_training_on_every_messy_source_at_once_completes_and_logs_skips(tmp_path):
    sources, tasks = [], []
    for kind, (build, task) in KINDS.items():
        if kind == "audio":
            continue
        sources.append(build(tmp_path / kind)[0])
        tasks.append(task())
    data = PretextDataModule(sources, tasks, batch_size=10, val_size=0, seed=1)
    torch.manual_seed(0)
    trainer = Trainer(
        max_steps=2,
        strategy=GRPOStrategy(num_generations=2, max_new_tokens=2),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[GRPOMetrics(summary=False)],
        limit_val_batches=0,
    )
    trainer.fit(QwenVLPolicy("tiny:qwen2_5_vl"), data)
    assert trainer.global_step == 2
    logged = trainer.callback_metrics
    assert logged["data/skipped"] > 0
    per_source = {k: v for k, v in logged.items() if k.startswith("data/skipped/")}
    assert sum(per_source.values()) == logged["data/skipped"]


def test_a_folder_of_only_bad_files_fails_fast_naming_them(tmp_path):
    root = tmp_path / "broken"
    make_item("image", 0).save(tmp_path / "good.jpg")
    bad = spoil(root, tmp_path / "good.jpg", ".jpg")
    data = PretextDataModule(ImageFolder(str(root)), Rotation(), batch_size=2, val_size=0)
    data.setup("fit")
    with pytest.raises(ValueError, match="source looks broken") as error:
        next(iter(data.train_dataloader()))
    assert str(root) in str(error.value) and any(p.name in str(error.value) for p in bad)
