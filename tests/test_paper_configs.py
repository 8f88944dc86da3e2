"""Every paper config (``configs/papers/*.yaml``) runs GRPO steps with a tiny model of its family
and a synthetic source of its modality, keeping every task, reward, loss, KL, curriculum and mixture
setting, under its own strategy (DDP or FSDP2) on one CPU process."""

import csv
import importlib
import json
import math
import os
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
PAPERS = sorted((ROOT / "configs" / "papers").glob("*.yaml"))
#: What a tiny run may change, as dotted paths into the config: scale, hardware and data location
#: only.
OVERRIDES = (
    "model.init_args.pretrained",
    "trainer.accelerator",
    "trainer.devices",
    "trainer.max_steps",
    "trainer.log_every_n_steps",
    "trainer.strategy.init_args.num_generations",
    "trainer.strategy.init_args.max_new_tokens",
    "trainer.callbacks.*.init_args.stages.*.step",
    "data.init_args.source",
    "data.init_args.source.*",
    "data.init_args.batch_size",
    "data.init_args.val_size",
    "data.init_args.test_size",
    "data.init_args.num_workers",
)
#: A synthetic source per modality: (class path, init_args).
SYNTHETIC = {
    "image": ("datamodules.SyntheticScenes", {"size": 32, "image_size": 112}),
    "video": ("datamodules.SyntheticVideos", {"size": 32, "num_frames": 24}),  # 6 trimmed clips of 2 frames
    "rgbd": ("datamodules.SyntheticRGBD", {"size": 32}),
    "gui": ("datamodules.SyntheticGUI", {"size": 32}),
    "audio": ("datamodules.SyntheticAudio", {"size": 32, "seconds": 2.0}),
    "point_cloud": ("datamodules.SyntheticPointClouds", {"size": 32, "num_points": 256}),
    "frame_pair": ("datamodules.SyntheticGridWorld", {"size": 32}),
}


def _import(class_path: str):
    module, name = class_path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def load(path: Path) -> dict:
    """The config with its group files (``model: ../model/x.yaml``) read in place."""
    config = yaml.safe_load(path.read_text())
    for key, value in config.items():
        if isinstance(value, str) and value.endswith(".yaml"):
            config[key] = yaml.safe_load((path.parent / value).read_text())
    return config


def tiny_checkpoint(model: dict) -> str:
    """The policy class's tiny checkpoint whose family the hub id names (``Qwen2.5-VL`` ->
    ``tiny:qwen2_5_vl``)."""
    cls = _import(model["class_path"])
    name = re.sub(r"[^a-z0-9]+", "_", model["init_args"]["pretrained"].lower())
    named = [c for c in cls.tiny_checkpoints if c.removeprefix("tiny:") in name]
    return max(named, key=len, default=cls.tiny_checkpoints[0])


def audio_qa(source: dict, folder: Path) -> dict:
    """The config's `AudioQAJsonl` over eight synthetic clips written to ``folder``."""
    import soundfile

    from datamodules import SyntheticAudio

    clips = SyntheticAudio(size=8, seconds=2.0)
    rows = []
    for i in range(len(clips)):
        soundfile.write(folder / f"clip{i}.wav", clips[i].waveform, clips[i].sampling_rate)
        rows.append(
            {
                "audio": f"clip{i}.wav",
                "question": "Which sound is it?",
                "choices": ["tones", "chirp", "noise", "rhythm", "vowel"],
                "answer": i % 5,
            }
        )
    (folder / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"class_path": source["class_path"], "init_args": source.get("init_args", {}) | {"path": "qa.jsonl"}}


def synthetic(source: dict, folder: Path) -> dict:
    modality = _import(source["class_path"]).modality
    if modality == "audio_qa":
        return audio_qa(source, folder)
    assert modality in SYNTHETIC, f"no synthetic source for modality {modality!r}: add one to SYNTHETIC"
    class_path, init_args = SYNTHETIC[modality]
    return {"class_path": class_path, "init_args": init_args}


def tiny_config(config: dict, folder: Path) -> dict:
    """``config`` at tiny scale: 2 prompts x 2 completions of 8 tokens, one step plus one per
    curriculum step stage (stage k begins at step k), every task held out at least once for
    validation and for testing (two items at least: contrastive tasks pair them)."""
    config = json.loads(json.dumps(config))  # a deep copy
    config["model"]["init_args"]["pretrained"] = tiny_checkpoint(config["model"])
    trainer = config["trainer"]
    stages = [s for c in trainer.get("callbacks", []) for s in c.get("init_args", {}).get("stages", []) if "step" in s]
    for k, stage in enumerate(stages, start=1):
        stage["step"] = k
    trainer |= {"accelerator": "cpu", "devices": 1, "max_steps": 1 + len(stages), "log_every_n_steps": 1}
    strategy = trainer.setdefault("strategy", {"class_path": "zoo.grpo.GRPOStrategy"})
    strategy.setdefault("init_args", {}).update(num_generations=2, max_new_tokens=8)
    data = config["data"]["init_args"]
    sources = data["source"] if isinstance(data["source"], list) else [data["source"]]
    tiny = [synthetic(s, folder) for s in sources]
    held_out = max(2, len(data["tasks"]))
    data |= {
        "source": tiny if isinstance(data["source"], list) else tiny[0],
        "batch_size": 2,
        "val_size": held_out,
        "test_size": held_out,
        "num_workers": 0,
    }
    return config


def flat(tree, prefix: str = "") -> dict:
    """``{"a.b.0.c": leaf}`` for every leaf of nested dicts and lists."""
    items = list(tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else [])
    if not items:
        return {prefix: tree}
    return {path: leaf for key, value in items for path, leaf in flat(value, f"{prefix}.{key}".lstrip(".")).items()}


def _same(a, b) -> bool:
    """Equal, counting a YAML 1.1 string such as ``1e-6`` equal to the float the CLI parsed it
    as."""
    try:
        return a == b or float(a) == float(b)
    except (TypeError, ValueError):
        return False


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """All paper configs at tiny scale, run one after the other in one fresh interpreter."""
    root = tmp_path_factory.mktemp("papers")
    for path in PAPERS:
        (folder := root / path.stem).mkdir()
        (folder / "config.yaml").write_text(yaml.safe_dump(tiny_config(load(path), folder), sort_keys=False))
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "tests.paper_configs", str(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return root


def test_every_paper_config_is_covered():
    assert len(PAPERS) >= 14 and {"r1_aqa", "omni_audio_pretext"} <= {p.stem for p in PAPERS}


@pytest.mark.parametrize("path", PAPERS, ids=lambda p: p.stem)
def test_paper_config_runs_grpo_steps_at_tiny_scale(runs, path):
    folder = runs / path.stem
    assert not (folder / "error.txt").exists(), (folder / "error.txt").read_text()[-5000:]
    (run,) = (folder / "runs" / "lightning_logs").iterdir()
    original, saved = load(path), yaml.safe_load((run / "config.yaml").read_text())
    kept, ran = flat(saved), flat(tiny_config(original, folder))
    dropped = [
        p
        for p, v in flat(original).items()
        if not any(fnmatch(p, o) for o in OVERRIDES) and not _same(v, kept.get(p, "<missing>"))
    ]
    assert not dropped, f"the tiny run changed recipe settings: {dropped}"
    assert _same(kept["trainer.max_steps"], ran["trainer.max_steps"])
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    losses = [float(r["train/grpo/loss"]) for r in rows if r.get("train/grpo/loss")]
    # one loss per optimizer step: GRPO trains on a whole accumulation window at its last batch
    assert len(losses) == ran["trainer.max_steps"] and all(math.isfinite(x) for x in losses)
    tasks = {_import(t["class_path"]).name for t in original["data"]["init_args"]["tasks"]}
    held_out = {m[1] for r in rows for name, v in r.items() if v and (m := re.fullmatch(r"val/(.+)/accuracy", name))}
    assert tasks <= held_out, f"tasks never made and verified an example: {tasks - held_out}"
