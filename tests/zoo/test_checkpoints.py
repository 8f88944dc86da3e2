"""Checkpoint writes survive a kill on any filesystem layout (TMPDIR elsewhere included) and leave
no stray files; ``--ckpt_path last`` is the newest checkpoint of the run's own directory that
loads."""

import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from zoo.checkpoints import publish, remove_stale, temporary_path, unloadable
from zoo.cli import ZooTrainer, last_checkpoint
from zoo.grpo import GRPOStrategy

ROOT = Path(__file__).parents[2]

KILLS = ("mid-write", "mid-copy", "at-rename")
# Runs in a subprocess, which forks one child per kill point: TMPDIR is another filesystem (renames
# across directories fail as across mounts), the run directory holds a good checkpoint, and the
# child is SIGKILLed at its kill point while zoo's writer saves a new one.
KILLED_SAVES = """
import errno, io, os, shutil, signal, sys, torch
from pathlib import Path
from zoo.cli import ZooTrainer
from zoo.grpo import GRPOStrategy
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
def local(rename):
    def within_one_filesystem(src, dst, *args, **kwargs):
        if Path(src).resolve().parent != Path(dst).resolve().parent:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return rename(src, dst, *args, **kwargs)
    return within_one_filesystem
os.rename, os.replace = local(os.rename), local(os.replace)
shutil._USE_CP_SENDFILE = False  # copies go through copyfileobj
save, replace = torch.save, os.replace
def save_half(obj, f, *args, **kwargs):  # the bytes are half written to wherever the writer writes them
    buffer = io.BytesIO(); save(obj, buffer); data = buffer.getvalue()
    f = open(f, "wb") if isinstance(f, (str, os.PathLike)) else f
    f.write(data[:len(data) // 2]); f.flush(); die()
def copy_half(src, dst, *args, **kwargs):  # the commit of a file staged in TMPDIR: a copy onto the target
    data = src.read(); dst.write(data[:len(data) // 2]); dst.flush(); die()
def save_killed_at(kill, target):
    if kill == "mid-write": torch.save = save_half
    if kill == "mid-copy": shutil.copyfileobj = copy_half
    if kill == "at-rename": os.replace = lambda src, dst: die() if Path(dst) == target else replace(src, dst)
    trainer = ZooTrainer(strategy=GRPOStrategy(), logger=False, enable_progress_bar=False)
    trainer.strategy.checkpoint_io.save_checkpoint({"state": torch.ones(200_000)}, target)
for kill, target in zip(sys.argv[1::2], sys.argv[2::2]):
    pid = os.fork()
    if pid == 0:
        save_killed_at(kill, Path(target))
        os._exit(0)
    os.waitpid(pid, 0)
"""


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """One run directory per kill point, each with a good checkpoint that a killed save tried to
    replace."""
    root = tmp_path_factory.mktemp("killed")
    other_fs = root / "tmpdir"
    other_fs.mkdir()
    targets = {kill: root / kill / "checkpoints" / "last.ckpt" for kill in KILLS}
    for target in targets.values():
        target.parent.mkdir(parents=True)
        torch.save({"state": torch.zeros(200_000)}, target)  # the previous good checkpoint
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), TMPDIR=str(other_fs))
    args = [str(a) for kill, target in targets.items() for a in (kill, target)]
    result = subprocess.run(
        [sys.executable, "-c", KILLED_SAVES, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return targets, other_fs


@pytest.mark.parametrize("kill", KILLS)
def test_a_kill_during_a_save_keeps_a_whole_checkpoint_and_leaves_no_stray_file(killed, kill):
    targets, other_fs = killed
    state = torch.load(targets[kill], weights_only=True)["state"]  # whole: the previous one or the new one
    assert torch.equal(state, torch.zeros(200_000)) or torch.equal(state, torch.ones(200_000))
    assert list(other_fs.iterdir()) == []  # nothing staged on the other filesystem
    remove_stale(targets[kill].parent)  # what the next run does when it starts
    assert [p.name for p in targets[kill].parent.iterdir()] == ["last.ckpt"]


def test_publishing_a_sharded_folder_replaces_the_old_one_whole(tmp_path):
    target = tmp_path / "step=4.ckpt"
    target.mkdir()
    (target / "__0_0.distcp").write_text("old")
    partial = temporary_path(target)
    partial.mkdir()
    (partial / "__0_0.distcp").write_text("new")
    publish(partial, target)
    assert (target / "__0_0.distcp").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_only_the_leftovers_of_dead_writers_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    ours = temporary_path(tmp_path / "a.ckpt")  # this process is alive: a write in progress
    theirs = Path(str(ours).replace(f"-{os.getpid()}.", f"-{pid}."))
    elsewhere = tmp_path / ".b.ckpt.otherhost-1.partial"
    for path in (ours, theirs, elsewhere):
        path.write_bytes(b"x")
    (tmp_path / "old_folder").mkdir()
    folder = Path(str(theirs).replace(".partial", ".old"))
    folder.mkdir()
    assert sorted(remove_stale(tmp_path)) == sorted([theirs, folder])
    assert ours.exists() and elsewhere.exists() and (tmp_path / "old_folder").exists()


def write(path: Path, step: int, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"global_step": step, "state_dict": {}}, path)
    os.utime(path, (mtime, mtime))
    return path


def test_last_is_the_newest_checkpoint_that_loads_within_this_runs_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    now = time.time()
    logs = tmp_path / "runs" / "lightning_logs"
    good = write(logs / "version_0" / "checkpoints" / "epoch=0-step=4.ckpt", 4, now - 30)
    cut = write(logs / "version_1" / "checkpoints" / "epoch=0-step=8.ckpt", 8, now - 20)
    cut.write_bytes(cut.read_bytes()[:300])  # a checkpoint a kill cut short (before zoo wrote atomically)
    os.utime(cut, (now - 20, now - 20))
    write(tmp_path / "other" / "runs" / "lightning_logs" / "version_0" / "checkpoints" / "x.ckpt", 99, now)
    write(tmp_path / "runs" / "another_name" / "version_0" / "checkpoints" / "y.ckpt", 98, now)  # another logger
    trainer = ZooTrainer(strategy=GRPOStrategy(), enable_progress_bar=False)  # CSV logs in runs/lightning_logs
    with pytest.warns(UserWarning, match="passing over .*step=8.ckpt"):
        assert last_checkpoint(trainer).resolve() == good
    good.unlink()
    with (
        pytest.raises(FileNotFoundError, match="no checkpoint that loads in runs/lightning_logs/version_0"),
        pytest.warns(UserWarning, match="passing over"),
    ):
        last_checkpoint(trainer)


def test_last_follows_the_logger_and_the_root_dir(tmp_path):
    now = time.time()
    logged = write(tmp_path / "logs" / "exp" / "version_3" / "checkpoints" / "a.ckpt", 1, now)
    loose = write(tmp_path / "root" / "checkpoints" / "b.ckpt", 2, now)
    logger = CSVLogger(save_dir=tmp_path / "logs", name="exp")
    trainer = ZooTrainer(strategy=GRPOStrategy(), logger=logger, enable_progress_bar=False)
    assert last_checkpoint(trainer).resolve() == logged
    no_logger = ZooTrainer(
        strategy=GRPOStrategy(), logger=False, default_root_dir=str(tmp_path / "root"), enable_progress_bar=False
    )
    assert last_checkpoint(no_logger).resolve() == loose


def finishes_within(seconds: float, call, unblock):
    """``call()``'s result, or a failure when it has not returned after ``seconds`` (``unblock()``
    then frees the thread, so a hang fails the test instead of stopping the suite)."""
    result = {}

    def run():
        try:
            result["value"] = call()
        except BaseException as err:  # re-raised in the test's thread
            result["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        thread.start()
        thread.join(seconds)
        hung = thread.is_alive()
        if hung:
            unblock()
            thread.join(10)
    assert not hung, f"still running after {seconds} s"
    if "error" in result:
        raise result["error"]
    return result["value"], [str(w.message) for w in caught]


def release(fifo: Path):
    """Open ``fifo`` for writing and close it: a reader blocked on it gets end-of-file."""
    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


STRAYS = {  # a newer entry named like a checkpoint, and why `last` passes over it
    "fifo": "not a regular file or folder",  # opening it for reading blocks until someone writes
    "fifo_index": ".metadata",  # a sharded checkpoint whose index is a FIFO
    "dangling_link": "no such file or folder",
    "vanished": "no such file or folder",  # removed between the listing and the stat
}


@pytest.mark.parametrize("stray", list(STRAYS))
def test_last_never_hangs_or_stops_on_a_stray_entry(stray, tmp_path, monkeypatch):
    now = time.time()
    checkpoints = tmp_path / "root" / "checkpoints"
    good = write(checkpoints / "epoch=0-step=2.ckpt", 2, now - 60)
    entry = checkpoints / "epoch=0-step=9.ckpt"
    fifos = []
    if stray == "fifo":
        os.mkfifo(entry)
        fifos.append(entry)
    elif stray == "fifo_index":
        entry.mkdir()
        os.mkfifo(entry / ".metadata")
        torch.save({"global_step": 9}, entry / "meta.pt")
        fifos.append(entry / ".metadata")
    elif stray == "dangling_link":
        os.symlink(checkpoints / "gone.ckpt", entry)
    else:
        write(entry, 9, now)
        stat = os.stat

        def vanishes_when_looked_at(path, *args, **kwargs):
            if Path(path) == entry:
                entry.unlink(missing_ok=True)
            return stat(path, *args, **kwargs)

        monkeypatch.setattr("zoo.checkpoints.os.stat", vanishes_when_looked_at)
    trainer = ZooTrainer(
        strategy=GRPOStrategy(), logger=False, default_root_dir=str(tmp_path / "root"), enable_progress_bar=False
    )
    unblock = lambda: [release(f) for f in fifos]  # noqa: E731
    found, warned = finishes_within(20, lambda: last_checkpoint(trainer), unblock)
    assert found.resolve() == good
    (warning,) = [w for w in warned if "passing over" in w]
    assert "step=9.ckpt" in warning and STRAYS[stray] in warning, warning
    if fifos:  # given directly: refused at once, never opened
        reason, _ = finishes_within(20, lambda: unloadable(entry), unblock)
        assert STRAYS[stray] in reason
