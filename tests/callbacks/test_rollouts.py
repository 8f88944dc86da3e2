"""RolloutSampler: rows spread over a batch's prompts, and every modality's media in TensorBoard,
W&B and MLflow (real loggers, read back from what they wrote)."""

import hashlib
import importlib.util
import io
import json
import random
import warnings
import wave
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import MLFlowLogger, TensorBoardLogger, WandbLogger
from PIL import Image

import tasks
from callbacks.rollout_media import THUMB_HEIGHT, audio_track, media_strip
from callbacks.rollouts import COLUMNS, RolloutSampler, spread_rows
from tasks import Reward
from tests.helpers import make_item
from zoo.rollout.rollout import Rollout

#: One prompt of each modality: 5 images, 3 videos, audio, a point cloud (prompt b of the batch).
SPECS = [
    (tasks.CropInpaint, "image"),
    (tasks.TemporalJigsaw, "video"),
    (tasks.AudioJigsaw, "audio"),
    (tasks.PointCloudRotation, "point_cloud"),
]
G = 3
AUDIO = 2  # the audio prompt's index
#: Rows the sampler writes with max_rows=8: completion 0 of prompts 0-3, then completion 1 of
#: prompts 0-3.
PICKED = [0, 3, 6, 9, 1, 4, 7, 10]


@pytest.fixture(scope="module")
def outputs():
    examples = [cls().make_example(make_item(modality, i), random.Random(i)) for i, (cls, modality) in enumerate(SPECS)]
    n = len(examples) * G
    rollout = Rollout(
        examples=examples,
        prompts=None,
        num_generations=G,
        completion_ids=torch.zeros(n, 1, dtype=torch.long),
        completion_mask=torch.ones(n, 1, dtype=bool),
        truncated=torch.zeros(n, dtype=bool),
        completions=[f"completion {i}" for i in range(n)],
    )
    return {"rollout": rollout, "rewards": [Reward(i / 10, {"accuracy": i / 10}) for i in range(n)]}


def write(tmp_path, loggers, outputs, steps=(5,)) -> list[str]:
    """Run the sampler's training hook at ``steps`` with ``loggers``; returns the warnings it
    raised."""
    trainer = SimpleNamespace(
        global_step=0,
        loggers=loggers,
        log_dir=str(tmp_path),
        default_root_dir=str(tmp_path),
        is_global_zero=True,
        sanity_checking=False,
    )
    sampler = RolloutSampler(every_n_steps=1, max_rows=8)
    sampler.setup(trainer, None, "fit")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in steps:
            trainer.global_step = step
            sampler.on_train_batch_end(trainer, None, outputs, [], 0)
    return [str(w.message) for w in caught if "RolloutSampler" in str(w.message)]


def expected_rows(outputs) -> list[dict]:
    rollout, rewards = outputs["rollout"], outputs["rewards"]
    return [
        {
            "task": rollout.example(n).task,
            "completion": rollout.completions[n],
            "reward": rewards[n].total,
            "example": rollout.example(n),
        }
        for n in PICKED
    ]


def decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    with wave.open(io.BytesIO(data)) as f:
        return np.frombuffer(f.readframes(f.getnframes()), "<i2") / 32767, f.getframerate()


def assert_audio(data: bytes, example) -> None:
    got, rate = decode_wav(data)
    want, want_rate = audio_track(example)
    assert rate == want_rate and got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2 / 32767)  # 16-bit PCM


def assert_picture(data: bytes, example) -> None:
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), media_strip(example))


def test_rows_spread_over_the_prompts(tmp_path, outputs):
    assert spread_rows(4, 3, 8) == PICKED and spread_rows(2, 8, 5) == [0, 8, 1, 9, 2]
    assert spread_rows(1, 4, 8) == [0, 1, 2, 3]
    assert write(tmp_path, [], outputs) == []
    rows = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    want = expected_rows(outputs)
    assert [r["completion"] for r in rows] == [w["completion"] for w in want]
    assert len({r["prompt"] for r in rows[:4]}) == 4 and [r["task"] for r in rows[:4]] == [w["task"] for w in want[:4]]


def test_every_modality_has_a_strip_and_audio_has_a_track(outputs):
    examples = outputs["rollout"].examples
    for example in examples:
        strip = media_strip(example)
        assert strip.dtype == np.uint8 and strip.shape[0] == THUMB_HEIGHT and strip.std() > 10, example.task
    widths = [
        round(p["image"].width * THUMB_HEIGHT / p["image"].height)
        for p in examples[0].messages[0]["content"]
        if p["type"] == "image"
    ]
    assert media_strip(examples[0]).shape[1] == sum(widths) + 4 * (len(widths) - 1)  # 5 images, 4 gaps
    assert media_strip(examples[1]).shape[1] > 3 * THUMB_HEIGHT  # frames of 3 clips
    wave_, rate = audio_track(examples[AUDIO])
    part = next(p for p in examples[AUDIO].messages[0]["content"] if p["type"] == "audio")
    assert rate == part["sampling_rate"] and np.array_equal(wave_, np.clip(part["audio"], -1, 1))
    assert all(audio_track(e) is None for i, e in enumerate(examples) if i != AUDIO)
    text_only = tasks.Example(
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}], answer=1, task="t"
    )
    assert media_strip(text_only) is None and audio_track(text_only) is None


def test_tensorboard_gets_strips_audio_and_texts(tmp_path, outputs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path / "tb")
    assert write(tmp_path, [logger], outputs) == []
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0, "audio": 0, "tensors": 0})
    events.Reload()
    want = expected_rows(outputs)
    assert set(events.Tags()["images"]) == {f"rollouts/train/{n}" for n in range(8)}
    assert set(events.Tags()["audio"]) == {f"rollouts/train/{n}/audio" for n in (AUDIO, AUDIO + 4)}
    for n, row in enumerate(want):
        assert_picture(events.Images(f"rollouts/train/{n}")[0].encoded_image_string, row["example"])
        (text,) = events.Tensors(f"rollouts/train/{n}/text_summary")
        text = text.tensor_proto.string_val[0].decode()
        assert row["completion"] in text and row["task"] in text and f"{row['reward']:.3f}" in text
    (clip,) = events.Audio(f"rollouts/train/{AUDIO}/audio")
    assert clip.step == 5 and clip.sample_rate == audio_track(want[AUDIO]["example"])[1]
    assert_audio(clip.encoded_audio_string, want[AUDIO]["example"])


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="needs wandb (zoo[wandb])")
def test_wandb_offline_tables_hold_images_and_audio(tmp_path, outputs, monkeypatch):
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):  # keep the run's files in tmp_path
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = WandbLogger(save_dir=str(tmp_path), offline=True, project="zoo-test")
    assert write(tmp_path, [logger], outputs, steps=(5, 6)) == []
    logger.experiment.finish()
    # offline, W&B stages a logged table and its media as artifact files, to be uploaded by `wandb
    # sync`
    staged = {
        hashlib.sha256(p.read_bytes()).hexdigest(): p.read_bytes()  # the same file may be staged twice
        for p in (tmp_path / "wandb_data_dir").rglob("*")
        if p.is_file()
    }
    tables = [json.loads(data) for data in staged.values() if data.startswith(b'{"_type": "table"')]
    assert sorted(t["data"][0][0] for t in tables) == [5, 6]
    want = expected_rows(outputs)
    for table in tables:
        assert table["columns"] == list(COLUMNS) and len(table["data"]) == 8
        for cells, row in zip(table["data"], want, strict=True):
            cell = dict(zip(COLUMNS, cells, strict=True))
            assert (cell["task"], cell["completion"], cell["reward"]) == (row["task"], row["completion"], row["reward"])
            assert cell["media"]["_type"] == "image-file"
            assert_picture(staged[cell["media"]["sha256"]], row["example"])
            if row["example"] is want[AUDIO]["example"]:
                assert cell["audio"]["_type"] == "audio-file"
                assert_audio(staged[cell["audio"]["sha256"]], row["example"])
            else:
                assert cell["audio"] is None


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="needs mlflow (zoo[mlflow])")
def test_mlflow_table_holds_images_and_audio(tmp_path, outputs, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks before it uses a local ./mlruns store
    logger = MLFlowLogger(experiment_name="zoo-test", save_dir=str(tmp_path / "mlruns"))
    assert write(tmp_path, [logger], outputs, steps=(5, 6)) == []
    artifacts = Path(logger.experiment.get_run(logger.run_id).info.artifact_uri.removeprefix("file://"))
    table = json.loads((artifacts / "rollouts" / "train.json").read_text())
    assert table["columns"] == list(COLUMNS) and len(table["data"]) == 16  # the second step appended
    want = expected_rows(outputs) * 2
    for cells, row in zip(table["data"], want, strict=True):
        cell = dict(zip(COLUMNS, cells, strict=True))
        assert (cell["task"], cell["completion"], cell["reward"]) == (row["task"], row["completion"], row["reward"])
        assert_picture((artifacts / cell["media"]["filepath"]).read_bytes(), row["example"])
        if row["example"] is want[AUDIO]["example"]:
            assert_audio((artifacts / cell["audio"]).read_bytes(), row["example"])
        else:
            assert cell["audio"] is None
    assert [r[0] for r in table["data"]] == [5] * 8 + [6] * 8


def test_a_validation_run_is_written_once_at_its_end(tmp_path, outputs):
    """Validation batches of 4 prompts x 3 with max_rows 14: all 12 rows of the first batch and 2 of
    the second reach the JSONL and TensorBoard when the run ends, numbered 0-13."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path / "tb")
    trainer = SimpleNamespace(
        global_step=7,
        loggers=[logger],
        log_dir=str(tmp_path),
        default_root_dir=str(tmp_path),
        is_global_zero=True,
        sanity_checking=False,
    )
    sampler = RolloutSampler(max_rows=14)
    sampler.setup(trainer, None, "fit")
    sampler.on_validation_epoch_start(trainer, None)
    for batch_idx in range(3):
        sampler.on_validation_batch_end(trainer, None, outputs, [], batch_idx)
    assert not (tmp_path / "rollouts.jsonl").exists()  # nothing before the run ends
    sampler.on_validation_epoch_end(trainer, None)
    logger.experiment.flush()
    rows = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    completions = outputs["rollout"].completions
    assert [r["row"] for r in rows] == list(range(14)) and {r["split"] for r in rows} == {"val"}
    assert [r["completion"] for r in rows] == [completions[n] for n in spread_rows(4, 3, 12) + [0, 3]]
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    assert set(events.Tags()["images"]) == {f"rollouts/val/{n}" for n in range(14)}


def test_a_failing_logger_is_a_warning_not_a_crash(tmp_path, outputs):
    class Broken(TensorBoardLogger):
        @property
        def experiment(self):
            raise ConnectionError("offline")

    messages = write(tmp_path, [Broken(tmp_path / "tb")], outputs)
    assert len(messages) == 1 and "Broken" in messages[0] and "offline" in messages[0]
    assert len((tmp_path / "rollouts.jsonl").read_text().splitlines()) == 8  # the JSONL still has the rows


def test_an_audio_run_sends_audio_and_spectrograms_to_every_logger(tmp_path, monkeypatch):
    """``zoo fit`` of the audio demo for one step with TensorBoard, W&B (offline) and MLflow at
    once."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.test_cli import ROOT
    from zoo.cli import cli

    loggers = [{"class_path": "lightning.pytorch.loggers.TensorBoardLogger", "init_args": {"save_dir": "runs"}}]
    if importlib.util.find_spec("wandb"):
        loggers.append(
            {
                "class_path": "lightning.pytorch.loggers.WandbLogger",
                "init_args": {"save_dir": "runs", "offline": True, "project": "zoo-test"},
            }
        )
    if importlib.util.find_spec("mlflow"):
        loggers.append(
            {
                "class_path": "lightning.pytorch.loggers.MLFlowLogger",
                "init_args": {"save_dir": "runs/mlruns", "experiment_name": "zoo-test"},
            }
        )
    (tmp_path / "loggers.yaml").write_text(json.dumps(loggers))
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.chdir(tmp_path)
    cli(
        [
            "fit",
            "--config",
            str(ROOT / "configs" / "audio_demo.yaml"),
            "--trainer.max_steps",
            "1",
            "--trainer.val_check_interval",
            "1",
            "--data.init_args.val_size",
            "2",
            "--data.init_args.batch_size",
            "2",
            "--trainer.strategy.init_args.num_generations",
            "2",
            "--rollouts.every_n_steps",
            "1",
            "--trainer.logger",
            "loggers.yaml",
        ]
    )
    if len(loggers) > 1:
        import wandb

        wandb.finish()
    (run,) = (tmp_path / "runs" / "lightning_logs").iterdir()
    events = EventAccumulator(str(run), size_guidance={"images": 0, "audio": 0})
    events.Reload()
    rows = {f"rollouts/{split}/{n}" for split, n in [("train", 0), ("train", 3), ("val", 0), ("val", 1)]}
    assert rows <= set(events.Tags()["images"]) and {f"{r}/audio" for r in rows} <= set(events.Tags()["audio"])
    assert decode_wav(events.Audio("rollouts/train/0/audio")[0].encoded_audio_string)[0].std() > 0.01
    if importlib.util.find_spec("wandb"):
        staged = {p.read_bytes() for p in (tmp_path / "wandb_data_dir").rglob("*") if p.is_file()}  # W&B may
        tables = [json.loads(data) for data in staged if data.startswith(b'{"_type": "table"')]  # stage twice
        # validation before fit and after step 1: 2 prompts x 1 each; training: 2 prompts x 2
        assert sorted((t["data"][0][0], len(t["data"])) for t in tables) == [(0, 2), (1, 2), (1, 4)]
        assert all(cells[COLUMNS.index("audio")]["_type"] == "audio-file" for t in tables for cells in t["data"])
    if importlib.util.find_spec("mlflow"):
        (wavs_dir,) = (tmp_path / "runs" / "mlruns").glob("*/*/artifacts/rollouts/train")
        assert len(list(wavs_dir.glob("*.wav"))) == 4
