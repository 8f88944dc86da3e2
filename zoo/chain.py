"""``zoo chain --config <chain.yaml>``: training stages one after another, each starting from the
weights the one before it ended with (an SFT cold start, then GRPO), every stage keeping its own
checkpoints, logs and metrics.

A chain file names the stages, in order; each is a ``zoo fit`` config (a path relative to the chain
file) with
optional extra command-line arguments::

    out: runs/cold_start
    stages:
      - {name: sft, config: ../sft/rotation.yaml}
      - {name: grpo, config: ../quickstart.yaml, args: [--trainer.max_steps, "200"]}

Stage ``k`` runs as its own ``zoo fit`` process (any launcher, device count and strategy work as
they do for ``zoo fit``) writing under ``<out>/<name>/``: logs and ``metrics.json``,
``checkpoints/last.ckpt`` (its final weights) and ``model/`` (those weights exported, `zoo.export`);
stage ``k + 1`` gets ``--model.init_args.pretrained <out>/<name of k>/model``. A stage whose
``model/`` exists is not run again, so a chain that stopped resumes at the stage that did not
finish, from that stage's newest checkpoint that loads (a stage stopped by SIGTERM or Ctrl+C saved
the step in progress; delete ``<out>/<name>`` to start a stage afresh). ``<out>/chain.json`` lists
every stage's paths and final held-out metrics.

Any stage's options can be overridden on the command line, prefixed with its name, without copying
its YAML: ``zoo chain --config configs/chains/cold_start.yaml --sft.trainer.max_steps 10
--grpo.trainer.max_steps=20`` (appended after the stage's own ``args``, so they win).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from zoo.checkpoints import newest_loadable
from zoo.errors import STOPPED
from zoo.export import export


def load_chain(path: str) -> tuple[Path, list[dict]]:
    """The output folder and the stages of a chain file, checked (names unique and path-safe,
    configs exist)."""
    file = Path(path)
    spec = None
    if file.is_file():
        with file.open() as stream:  # a stream, so that a refused YAML tag's line names the file
            spec = yaml.safe_load(stream)
    if not isinstance(spec, dict) or not isinstance(spec.get("stages"), list) or not spec["stages"]:
        raise ValueError(f"{path}: a chain file is a mapping with a non-empty 'stages' list")
    stages = []
    names = set()
    for stage in spec["stages"]:
        stage = stage if isinstance(stage, dict) else {}
        name = stage.get("name")
        config = stage.get("config")
        args = stage.get("args")
        if not isinstance(name, str) or not name.isidentifier() or name in names:
            raise ValueError(f"{path}: every stage needs a unique name of letters, digits and '_', got {name!r}")
        config = (file.parent / str(config)).resolve()
        if not config.is_file():
            raise ValueError(f"{path}: stage {name!r} names no existing config ({config})")
        if args is not None and not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            raise ValueError(f"{path}: the args of stage {name!r} must be a list of strings")
        names.add(name)
        stages.append({"name": name, "config": str(config), "args": list(args or [])})
    return Path(spec.get("out", "runs/chain")), stages


def stage_command(stage: dict, folder: Path, start: Path | None, resume: Path | None = None) -> list[str]:
    """The ``zoo fit`` command of a stage: its config and arguments, its outputs under ``folder``,
    its final weights checkpointed (``last.ckpt``), its start from ``start`` (the previous stage's
    export), and the checkpoint it resumes from, if it was stopped before (``resume``)."""
    command = [
        sys.executable,
        "-m",
        "zoo",
        "fit",
        "--config",
        stage["config"],
        *stage["args"],
        "--trainer.default_root_dir",
        str(folder),
        "--trainer.callbacks+=callbacks.Checkpoints",
        "--trainer.callbacks.dirpath",
        str(folder / "checkpoints"),
        "--trainer.callbacks.save_last",
        "true",
    ]
    command += ["--model.init_args.pretrained", str(start)] if start else []
    return command + (["--ckpt_path", str(resume)] if resume else [])


def run_stage(command: list[str]) -> int:
    """Run a stage's ``zoo fit`` and return its exit status. SIGTERM or SIGINT sent to the chain
    reach it as SIGTERM (it saves the step in progress and stops), and the chain waits for it."""
    child = subprocess.Popen(command)
    if threading.current_thread() is not threading.main_thread():
        return child.wait()
    forward = lambda signum, frame: child.send_signal(signal.SIGTERM)  # noqa: E731
    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def latest_metrics(folder: Path) -> dict:
    """The metrics of the stage's latest evaluation (``metrics.json`` of its newest run), or {}
    without one."""
    found = sorted(folder.glob("**/metrics.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(found[-1].read_text()).get("metrics", {}) if found else {}


def stage_overrides(args: list[str], names: list[str]) -> dict[str, list[str]]:
    """``--<stage>.<option> value`` (or ``--<stage>.<option>=value``) arguments as each stage's
    extra ``zoo fit`` arguments (``--<option> value``); anything else is a one-line error naming the
    stages."""
    out: dict[str, list[str]] = {name: [] for name in names}
    i = 0
    while i < len(args):
        stage, dot, option = args[i].removeprefix("--").partition(".")
        if not args[i].startswith("--") or not dot or stage not in out:
            raise ValueError(
                f"{args[i]!r} is not an option; override a stage's zoo fit option as "
                f"--<stage>.<option> value, the stages being {names}"
            )
        take = 1 if "=" in option else 2
        if take == 2 and i + 1 >= len(args):
            raise ValueError(f"{args[i]} needs a value")
        out[stage] += [f"--{option}", *args[i + 1 : i + take]]
        i += take
    return out


def with_overrides(stages: list[dict], overrides: list[str]) -> list[dict]:
    """``stages`` with each one's `stage_overrides` after its own ``args`` (so they win)."""
    extra = stage_overrides(overrides, [stage["name"] for stage in stages])
    return [{**stage, "args": stage["args"] + extra[stage["name"]]} for stage in stages]


def run_chain(path: str, out: str | None = None, overrides: list[str] | None = None) -> list[dict]:
    """Run the stages of a chain file in order, each with its ``--<stage>.<option>`` ``overrides``;
    returns (and writes to ``<out>/chain.json``) what each left."""
    root, stages = load_chain(path)
    stages = with_overrides(stages, list(overrides or []))
    root, start, done = (Path(out) if out else root).resolve(), None, []
    for stage in stages:
        folder = root / stage["name"]
        model = folder / "model"
        if model.is_dir():
            print(f"[zoo] chain: stage {stage['name']} is done ({model}); not run again", flush=True)
        else:
            resume, _ = newest_loadable([folder / "checkpoints"])
            begin = f"resumes from {resume}" if resume else f"starts from {start or 'its config'}"
            print(f"[zoo] chain: stage {stage['name']} {begin}", flush=True)
            status = run_stage(stage_command(stage, folder, start, resume))
            if status in STOPPED.values():  # a signal stopped the stage: the chain stops with its status
                print(
                    f"[zoo] chain: stage {stage['name']} was stopped by a signal (exit status {status}); "
                    "run the chain again to resume it from its newest checkpoint",
                    file=sys.stderr,
                )
                raise SystemExit(status)
            if status != 0:
                raise SystemExit(
                    f"[zoo] chain: stage {stage['name']} failed; fix it and run the chain again "
                    "(finished stages are kept)"
                )
            export(folder / "checkpoints" / "last.ckpt", model)
        done.append(
            {
                "name": stage["name"],
                "config": stage["config"],
                "started_from": str(start or ""),
                "checkpoint": str(folder / "checkpoints" / "last.ckpt"),
                "model": str(model),
                "metrics": latest_metrics(folder),
            }
        )
        start = model
    root.mkdir(parents=True, exist_ok=True)
    (root / "chain.json").write_text(json.dumps(done, indent=1))
    return done


def chain(*, config: str, out: str | None = None, fit_args: list[str] | None = None) -> None:
    """Train stages in order, each from the weights the one before ended with (an SFT cold start,
    then GRPO).

    A stage that finished is not run again.

    Args:
        config: The chain file: ``out`` (the folder of the stages' outputs) and ``stages``, each a
            ``zoo fit`` config with optional ``args`` (see `zoo.chain`).
        out: Folder of the stages' outputs, instead of the chain file's ``out``.
        fit_args: Any other argument overrides a stage's ``zoo fit`` option, prefixed with the
            stage's name: ``--sft.trainer.max_steps 10`` (after the stage's own ``args``).
    """
    for stage in run_chain(config, out, fit_args):
        print(f"[zoo] chain: {stage['name']}: {stage['model']} {stage['metrics'].get('val/accuracy', '')}")
