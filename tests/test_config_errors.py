"""Configuration and input mistakes end in one error line that names the fix, before any training;
--debug (or ZOO_DEBUG=1) shows the traceback instead."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from datamodules.sources import AudioFolder, PointCloudFolder, SyntheticRGBD, SyntheticVideos
from datamodules.sources.video_folder import decode
from zoo import QwenVLPolicy
from zoo.cli import main

ROOT = Path(__file__).parents[1]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
FAST = [
    "--trainer.max_steps",
    "1",
    "--validate_before_fit",
    "false",
    "--trainer.enable_progress_bar",
    "false",
    "--data.init_args.val_size",
    "4",
    "--data.init_args.test_size",
    "0",
    "--data.init_args.batch_size",
    "2",
    "--trainer.strategy.init_args.num_generations",
    "2",
]
GRPO, DATA = "--trainer.strategy.init_args.", "--data.init_args."


def folder(name: str) -> list[str]:
    return [f"{DATA}source", "datamodules.ImageFolder", f"{DATA}source.init_args.root", name]


# (command line after `zoo fit --config quickstart.yaml`, what the one line must say)
CASES = {
    "model-path": (["--model.init_args.pretrained", "/no/such/model"], "'/no/such/model': no such directory"),
    "hub-id-offline": (["--model.init_args.pretrained", "Qwen/Qwen2.5-VL-3B-Instruct"], "cannot be loaded"),
    "num-generations-0": ([f"{GRPO}num_generations", "0"], "num_generations must be >= 2, got 0"),
    "num-generations-1": ([f"{GRPO}num_generations", "1"], "num_generations must be >= 2, got 1"),
    "max-new-tokens-0": ([f"{GRPO}max_new_tokens", "0"], "max_new_tokens must be >= 1, got 0"),
    "temperature": ([f"{GRPO}temperature", "-1"], "temperature must be > 0"),
    "negative-lr": (["--model.init_args.optimizer.init_args.lr", "-1"], "Invalid learning rate: -1.0"),
    "freeze-group": (["--model.init_args.freeze", "[wings]"], "unknown freeze groups ['wings']"),
    "batch-over-dataset": ([*folder("small"), f"{DATA}batch_size", "16"], "holds no full global batch of 16"),
    "batch-size-0": ([f"{DATA}batch_size", "0"], "batch_size must be >= 1, got 0"),
    "empty-folder": (folder("empty"), "no files ending in"),
    "missing-folder": (folder("missing"), "is not an existing directory"),
    "corrupt-folder": (folder("corrupt"), "the source looks broken"),
    "val-size-over-source": ([f"{DATA}val_size", "20000"], "val_size=20000 would hold out all"),
    "weights-length": ([f"{DATA}weights", "[1, 2]"], "weights has 2 entries for 1 tasks"),
    "task-modality": ([f"{DATA}tasks", "[{class_path: tasks.AudioJigsaw}]"], "takes audio items but the sources"),
    "ckpt-missing": (["--ckpt_path", "missing.ckpt"], "--ckpt_path missing.ckpt: no such file or folder"),
    "ckpt-garbage": (["--ckpt_path", "garbage.ckpt"], "not a torch checkpoint archive"),
    "ckpt-truncated": (["--ckpt_path", "truncated.ckpt"], "not a torch checkpoint archive"),
    "ckpt-last-none": (["--ckpt_path", "last"], "--ckpt_path last: no checkpoint that loads"),
    "abbreviated-option": (["--trainer.max_step", "5"], "unrecognized arguments: --trainer.max_step 5"),
    "unknown-option": (["--model.init_args.bogus", "3"], "model (zoo.QwenVLPolicy): Option 'bogus' is not accepted"),
    "wrong-type": (["--trainer.max_steps", "abc"], "trainer.max_steps: Expected a <class 'int'>. Got value: abc"),
    "class-typo": (["--model", "zoo.QwenVLPolix"], "model (zoo.QwenVLPolix): module 'zoo' has no attribute"),
    "missing-config": (["--config", "missing.yaml"], "config: File does not exist:"),
}


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A working directory with the folders and files the cases name."""
    for name in ("small", "empty", "corrupt"):
        (tmp_path / name).mkdir()
    for i in range(12):
        pixels = np.random.default_rng(i).integers(0, 255, (32, 32, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / "small" / f"{i}.png")
        (tmp_path / "corrupt" / f"{i}.png").write_bytes(b"not an image")
    (tmp_path / "garbage.ckpt").write_bytes(b"junk" * 100)
    torch.save({"state_dict": {"w": torch.zeros(1000)}}, tmp_path / "whole.ckpt")
    (tmp_path / "truncated.ckpt").write_bytes((tmp_path / "whole.ckpt").read_bytes()[:2000])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def error_lines(capsys, args: list[str]) -> tuple[int, list[str], str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    err = capsys.readouterr().err
    return exit_info.value.code, [line for line in err.splitlines() if ": error: " in line], err


@pytest.mark.parametrize("args, fix", CASES.values(), ids=CASES.keys())
def test_a_bad_configuration_or_input_is_one_line_and_a_nonzero_exit(inputs, capsys, args, fix):
    code, errors, err = error_lines(capsys, ["fit", "--config", QUICKSTART, *FAST, *args])
    assert code != 0 and "Traceback" not in err, err[-3000:]
    (line,) = errors
    assert line.startswith("zoo fit: error: ") and fix in line, line
    assert err.rstrip().endswith(line)  # nothing after it
    assert not list(inputs.glob("runs/**/*.ckpt"))


def test_zoo_test_without_a_test_split_names_the_setting(inputs, capsys):
    code, (line,), _ = error_lines(capsys, ["test", "--config", QUICKSTART, *FAST[4:]])
    assert code == 1 and "no test split: set data.init_args.test_size" in line


def test_debug_raises_with_the_traceback(inputs, monkeypatch):
    with pytest.raises(ValueError, match="num_generations must be >= 2"):
        main(["fit", "--config", QUICKSTART, f"{GRPO}num_generations", "1", "--debug"])
    monkeypatch.setenv("ZOO_DEBUG", "1")
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        main(["fit", "--config", QUICKSTART, f"{GRPO}max_new_tokens", "0"])


def test_an_error_inside_a_training_step_keeps_its_traceback(inputs, monkeypatch):
    """Not a configuration mistake: the one-line treatment is for set-up, never for a failure
    mid-run."""
    from zoo.grpo.strategy import GRPOMixin

    def training_step(self, batch, batch_idx):
        raise ValueError("a bug in the step")

    monkeypatch.setattr(GRPOMixin, "training_step", training_step)
    with pytest.raises(ValueError, match="a bug in the step"):
        main(["fit", "--config", QUICKSTART, *FAST])


def test_the_console_script_prints_exactly_one_line(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "zoo", "fit", "--config", QUICKSTART, "--trainer.max_step", "5"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "zoo fit: error: unrecognized arguments: --trainer.max_step 5; see zoo fit --help (--debug shows the traceback)"
    ]


@pytest.mark.parametrize(
    "module, extra, use",
    [
        ("decord", "video", lambda tmp: decode(str(tmp / "clip.mp4"))),
        ("av", "video", lambda tmp: SyntheticVideos(size=1, root=str(tmp))[0]),
        ("open3d", "3d", lambda tmp: PointCloudFolder(str(tmp))[0]),
        ("open3d", "3d", lambda tmp: SyntheticRGBD(size=1)[0]),
        ("soundfile", "audio", lambda tmp: AudioFolder(str(tmp))[0]),
        ("peft", "lora", lambda tmp: QwenVLPolicy("tiny:qwen2_5_vl", lora={"rank": 2}).configure_model()),
    ],
    ids=["decord", "av", "open3d-points", "open3d-rgbd", "soundfile", "peft"],
)
def test_a_missing_extra_names_its_install_line(monkeypatch, tmp_path, module, extra, use):
    for name in ("clip.mp4", "cloud.ply", "sound.wav"):
        (tmp_path / name).write_bytes(b"not media")
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    with pytest.raises(ImportError, match=rf'pip install "zoo\[{extra}\]"'):
        use(tmp_path)
