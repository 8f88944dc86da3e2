"""Configuration mistakes end in one error line that names the fix, before any training."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from datamodules.sources import AudioFolder, PointCloudFolder, SyntheticRGBD, SyntheticVideos
from datamodules.sources.video_folder import decode
from zoo import QwenVLPolicy

ROOT = Path(__file__).parents[1]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")


@pytest.mark.parametrize("args, fix", [
    (["--model.init_args.bogus", "3"], "Option 'bogus' is not accepted"),
    (["--trainer.strategy.init_args.num_generations", "1"], "num_generations must be >= 2, got 1"),
    (["--model.init_args.freeze", "[wings]"], "unknown freeze groups ['wings']"),
], ids=["unknown-key", "one-generation", "freeze-group"])
def test_cli_configuration_errors(tmp_path, args, fix):
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "zoo", "fit", "--config", QUICKSTART, "--trainer.max_steps",
                             "1", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert fix in result.stderr, result.stderr[-2000:]
    assert not list(tmp_path.glob("runs/**/checkpoints/*.ckpt"))


@pytest.mark.parametrize("module, extra, use", [
    ("decord", "video", lambda tmp: decode(str(tmp / "clip.mp4"))),
    ("av", "video", lambda tmp: SyntheticVideos(size=1, root=str(tmp))[0]),
    ("open3d", "3d", lambda tmp: PointCloudFolder(str(tmp))[0]),
    ("open3d", "3d", lambda tmp: SyntheticRGBD(size=1)[0]),
    ("soundfile", "audio", lambda tmp: AudioFolder(str(tmp))[0]),
    ("peft", "lora", lambda tmp: QwenVLPolicy("tiny:qwen2_5_vl", lora={"rank": 2}).configure_model()),
], ids=["decord", "av", "open3d-points", "open3d-rgbd", "soundfile", "peft"])
def test_a_missing_extra_names_its_install_line(monkeypatch, tmp_path, module, extra, use):
    for name in ("clip.mp4", "cloud.ply", "sound.wav"):
        (tmp_path / name).write_bytes(b"not media")
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    with pytest.raises(ImportError, match=rf'pip install "zoo\[{extra}\]"'):
        use(tmp_path)
