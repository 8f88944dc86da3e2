"""Two ways a run meets the outside world fail at once, in one line: a write that finds the disk
full names the file and the file system (not ``[Errno 28]`` or ``unexpected pos``), and a YAML tag
that asks for a Python object is refused by name (configs are data) and never runs."""

import errno
import os
from pathlib import Path

import pytest
import torch

import zoo.checkpoints
from zoo.checkpoints import AtomicCheckpointIO
from zoo.cli import main
from zoo.errors import DiskFull, user_error, writing

ROOT = Path(__file__).parents[2]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
ONE_STEP = [
    "--trainer.max_steps=1",
    "--validate_before_fit=false",
    "--trainer.enable_progress_bar=false",
    "--data.init_args.val_size=2",
    "--data.init_args.test_size=0",
    "--data.init_args.batch_size=2",
    "--trainer.strategy.init_args.num_generations=2",
]
FULL = "/dev/full"  # every write to it fails with ENOSPC, as a full disk does


def onto_a_full_disk(monkeypatch) -> None:
    """Checkpoint bytes go to a link to /dev/full, where a write fails as on a full disk."""

    def staged(target, kind="partial"):
        link = Path(target).parent / f".{Path(target).name}.full"
        link.unlink(missing_ok=True)
        link.symlink_to(FULL)
        return link

    monkeypatch.setattr(zoo.checkpoints, "temporary_path", staged)


needs_dev_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full on this system")


@needs_dev_full
def test_a_checkpoint_written_to_a_full_disk_is_one_line_naming_it(monkeypatch, tmp_path):
    onto_a_full_disk(monkeypatch)
    target = tmp_path / "epoch=0-step=1.ckpt"
    with pytest.raises(DiskFull) as caught:
        AtomicCheckpointIO().save_checkpoint({"weights": torch.zeros(100_000)}, target)
    line = user_error(caught.value)
    assert line.startswith("no space left on /") and f"while writing {target}:" in line, line
    assert "MiB free" in line and "\n" not in line
    assert not target.exists()


@needs_dev_full
def test_zoo_fit_on_a_full_disk_ends_in_one_line_naming_the_checkpoint(monkeypatch, tmp_path, capsys):
    onto_a_full_disk(monkeypatch)
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", QUICKSTART, *ONE_STEP, f"--trainer.default_root_dir={tmp_path}"])
    assert stopped.value.code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    checkpoint = tmp_path / "lightning_logs" / "version_0" / "checkpoints" / "epoch=0-step=1.ckpt"
    assert last.startswith("zoo fit: error: no space left on "), last
    assert f"while writing {checkpoint}:" in last, last


def test_writing_names_the_outer_file_and_leaves_other_errors_alone(tmp_path):
    with pytest.raises(DiskFull, match="while writing outer.bin"), writing("outer.bin"), writing("inner.tmp"):
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(DiskFull, match="while writing quota.bin"), writing("quota.bin"):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")
    with pytest.raises(PermissionError), writing(tmp_path / "x"):
        raise PermissionError(errno.EACCES, "Permission denied")
    bare = OSError(errno.ENOSPC, "No space left on device", "log.csv")
    assert user_error(bare) == "no space left on device while writing log.csv: free some space and run again"


EVIL = '!!python/object/apply:os.system ["touch {marker}"]'


@pytest.mark.parametrize("where", ["config-file", "chain-file"])
def test_a_python_yaml_tag_is_refused_by_name_and_never_runs(where, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    evil = EVIL.format(marker=marker)
    if where == "config-file":
        Path("evil.yaml").write_text(f"trainer:\n  max_steps: {evil}\n")
        argv = ["fit", "--config", "evil.yaml"]
    else:
        Path("evil.yaml").write_text(f"out: runs\nstages: {evil}\n")
        argv = ["chain", "--config", "evil.yaml"]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code in (1, 2)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "YAML tag !!python/object/apply:os.system refused" in line, line
    assert "line 2, column" in line and ("evil.yaml, line 2" in line) == (where == "chain-file"), line
    assert not marker.exists()
