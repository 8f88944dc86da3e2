"""Checks before a command builds anything, each a one-line error that names the fix: a folder
that shadows the installed ``zoo`` package, a GPU trainer group on a machine without a GPU, and
LightningCLI's optimizer options, which zoo leaves to the policy."""

from __future__ import annotations

import sys
from pathlib import Path

#: The installed package: the folder of this file.
PACKAGE = Path(__file__).resolve().parent
#: LightningCLI's optimizer options, which zoo leaves out, and the policy argument that does their
#: job.
POLICY_ARGUMENTS = {"optimizer": "optimizer", "lr_scheduler": "scheduler"}
#: Trainer ``accelerator`` values that need a CUDA device.
GPU_ACCELERATORS = ("gpu", "cuda")


def check_not_shadowed() -> None:
    """A ``zoo/`` folder without zoo's files found first on ``sys.path`` (the working directory of
    a user's script, say) makes ``import zoo`` an empty namespace package: name it instead of
    failing later on a missing family or class."""
    module = sys.modules.get("zoo")
    if module is None:
        return
    file = getattr(module, "__file__", None)
    if file is None or Path(file).resolve().parent != PACKAGE:
        where = file or next(iter(getattr(module, "__path__", [])), "?")
        folder = Path(where).parent if file else Path(where)
        raise ImportError(f"a folder named zoo/ at {folder} shadows the zoo package; rename it")


def refuse_trainer_optimizer(args) -> None:
    """``--optimizer`` / ``--lr_scheduler`` (LightningCLI's, which zoo does not offer): one line
    naming the policy argument that sets them (the policy builds its optimizer itself)."""
    for arg in args if isinstance(args, list) else []:
        name = str(arg).removeprefix("--").split("=", 1)[0].split(".", 1)[0]
        if str(arg).startswith("--") and name in POLICY_ARGUMENTS:
            policy = POLICY_ARGUMENTS[name]
            raise ValueError(
                f"--{name} is not a zoo option: the policy's {policy!r} argument sets it "
                f"(--model.init_args.{policy}, e.g. --model.init_args.{policy}.init_args.lr 1e-4)"
            )


def check_gpu(trainer) -> None:
    """A trainer asking for a GPU on a machine without one: the fix, in one line (Lightning's own
    message, "No supported gpu backend found!", names none)."""
    accelerator = trainer.get("accelerator") if hasattr(trainer, "get") else None
    if str(accelerator).lower() in GPU_ACCELERATORS:
        import torch

        if not torch.cuda.is_available():
            raise ValueError(
                f"no GPU found: this config asks for accelerator {accelerator}; add --trainer configs/trainer/cpu.yaml"
            )
