"""The ``zoo`` command: LightningCLI over policies (`zoo.PolicyModule`) and data modules.

``zoo fit --config configs/quickstart.yaml``; ``zoo fit --help``; ``zoo fit --print_config``;
``zoo export --ckpt <checkpoint> --out <dir>`` (a Hugging Face directory); ``zoo list`` (models, tasks, sources);
``zoo speed`` (zoo vs TRL GRPOTrainer, same settings); ``zoo repro <claim>`` (small-scale paper reproductions);
``zoo preview --config <yaml>`` (a contact sheet of what the policy sees);
``zoo pretext-bench export --out <dir>`` (the fixed-seed pretext benchmark, evaluated with ``zoo test``);
``zoo chain --config <chain.yaml>`` (stages such as an SFT cold start then GRPO, each from the last one's weights);
``zoo select --config <yaml>`` (keep the items a base policy's pass rate varies on).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import torch
from lightning.pytorch import LightningDataModule, Trainer
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.strategies import Strategy

import datamodules  # noqa: F401  (short class names in configs)
import tasks  # noqa: F401
from callbacks import GRPOMetrics, Predictions, RolloutSampler, TrainingCurves
from zoo.policy import PolicyModule

#: Logger classes whose package is an optional extra: (import name, extra).
LOGGER_PACKAGES = {"TensorBoardLogger": ("tensorboard", "tensorboard"), "WandbLogger": ("wandb", "wandb"),
                   "MLFlowLogger": ("mlflow", "mlflow")}
TRAINER_DEFAULTS = {
    "strategy": {"class_path": "zoo.grpo.GRPOStrategy"},
    "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": "runs"}},
    "num_sanity_val_steps": 0,
    "log_every_n_steps": 10,
}


class ZooTrainer(Trainer):
    """Lightning's Trainer with ``strategy`` typed as a Strategy class (not a registry name), so
    ``--trainer.strategy GRPODDPStrategy`` switches the class and keeps the GRPO settings of the config.

    Args:
        strategy: A GRPO strategy (``zoo.grpo.GRPOStrategy``, ``GRPODDPStrategy``, ``GRPOFSDPStrategy``).
        **kwargs: Arguments of `lightning.pytorch.Trainer`.
    """

    def __init__(self, strategy: Strategy, **kwargs):
        super().__init__(strategy=strategy, **kwargs)


class ZooCLI(LightningCLI):
    """LightningCLI with GRPO defaults: the single-device GRPO strategy, a CSV logger, the metrics, rollout,
    curves and predictions callbacks (configured under ``metrics:``, ``rollouts:``, ``curves:`` and
    ``predictions:``), and held-out validation before fit."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(GRPOMetrics, "metrics")
        parser.add_lightning_class_args(RolloutSampler, "rollouts")
        parser.add_lightning_class_args(TrainingCurves, "curves")
        parser.add_lightning_class_args(Predictions, "predictions")
        parser.add_argument("--validate_before_fit", type=bool, default=True,
                            help="Run validation once before training, so the log starts with step-0 accuracy.")

    def _parse_ckpt_path(self) -> None:
        """LightningCLI merges a checkpoint's hyperparameters into the config; here only as data (`zoo.trust`):
        the class must be zoo's or the config's own, and ``trust_remote_code`` never comes from a checkpoint."""
        from zoo.trust import checkpoint_model

        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not ckpt_path or not Path(ckpt_path).is_file():
            return
        hparams = torch.load(ckpt_path, map_location="cpu", weights_only=True).get("hyper_parameters", {})
        config_class = (self.config[subcommand].get("model") or {}).get("class_path")
        model = checkpoint_model(hparams, config_class, source=ckpt_path)
        if model is not None:
            self.config = self.parser.parse_object({subcommand: {"model": model}}, self.config)

    def before_instantiate_classes(self) -> None:
        config = self.config.get(self.subcommand) if self.subcommand else None
        if config is None:
            return
        _check_logger_packages(config.trainer.get("logger"))
        if config.get("ckpt_path") == "last":
            config.ckpt_path = str(latest_checkpoint(_run_roots(config)))

    def before_fit(self) -> None:
        config = self.config[self.subcommand]
        if config.get("validate_before_fit"):  # from the checkpoint's weights when resuming
            self.trainer.validate(self.model, datamodule=self.datamodule, ckpt_path=config.get("ckpt_path"),
                                  verbose=False)


def _check_logger_packages(logger) -> None:
    """A logger whose package is not installed: one clear line naming the extra, before anything is built."""
    loggers = logger if isinstance(logger, list) else [logger]
    for item in loggers:
        class_path = item.get("class_path", "") if hasattr(item, "get") else ""
        package, extra = LOGGER_PACKAGES.get(class_path.rsplit(".", 1)[-1], (None, None))
        if package and importlib.util.find_spec(package) is None:
            raise ModuleNotFoundError(f"trainer.logger {class_path} needs the {package!r} package: "
                                      f"pip install 'zoo[{extra}]' (or pip install {package})")


def _run_roots(config) -> list[Path]:
    """Where this configuration writes runs: the logger's save_dir and the trainer's root dir."""
    logger = config.trainer.get("logger")
    save_dir = logger.get("init_args", {}).get("save_dir") if isinstance(logger, dict) else None
    return [Path(p) for p in (save_dir, config.trainer.get("default_root_dir") or ".") if p]


def latest_checkpoint(roots: list[Path]) -> Path:
    """The most recently written ``*.ckpt`` (file or distributed-checkpoint folder) under ``roots``."""
    found = [p for root in roots if root.exists() for p in root.glob("**/checkpoints/*.ckpt")]
    if not found:
        raise FileNotFoundError(f"--ckpt_path last: no checkpoints/*.ckpt under {[str(r) for r in roots]}")
    return max(found, key=lambda p: p.stat().st_mtime)


def cli(args: list[str] | None = None, cli_class: type[ZooCLI] = ZooCLI, **kwargs) -> ZooCLI:
    """Build (and by default run) the CLI; ``kwargs`` go to `ZooCLI` (e.g. ``run=False`` in tests)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # data workers fork after tokenizer use
    return cli_class(PolicyModule, LightningDataModule, trainer_class=ZooTrainer, subclass_mode_model=True,
                     subclass_mode_data=True, save_config_kwargs={"overwrite": True},
                     trainer_defaults=TRAINER_DEFAULTS, seed_everything_default=0, args=args, **kwargs)


def export_main(args: list[str]) -> None:
    """``zoo export``: rebuild the policy of a checkpoint, merge LoRA, write a Hugging Face directory."""
    from zoo.tools.export import export

    parser = argparse.ArgumentParser(prog="zoo export", description=export_main.__doc__)
    parser.add_argument("--ckpt", required=True, help="a .ckpt file, or the folder a GRPOFSDPStrategy run saved")
    parser.add_argument("--out", required=True, help="output directory (model, processor, chat template)")
    parser.add_argument("--policy", action="append", default=[], help="import path of the checkpoint's policy "
                        "class when it is not one of zoo's (a checkpoint alone never makes zoo import a class)")
    options = parser.parse_args(args)
    print(f"[zoo] exported {options.ckpt} to {export(options.ckpt, options.out, options.policy)}")


def list_main(args: list[str]) -> None:
    """``zoo list``: the models, tasks and sources available, with the extras each needs."""
    from zoo.tools.catalog import print_catalog

    argparse.ArgumentParser(prog="zoo list", description=list_main.__doc__).parse_args(args)
    print_catalog()


def speed_main(args: list[str]) -> None:
    """``zoo speed``: GRPO steps of zoo and TRL's GRPOTrainer side by side (see `zoo.tools.speed`)."""
    from zoo.tools.speed import main as speed

    speed(args)


def bench_main(args: list[str]) -> None:
    """``zoo bench``, the old name of ``zoo speed``: a one-line pointer, since "benchmark" now means evaluation."""
    raise SystemExit("zoo bench is now zoo speed (zoo vs TRL: step time, tokens/s, memory); evaluation benchmarks run "
                     "with zoo test --config configs/eval/<benchmark>.yaml, the pretext one is zoo pretext-bench")


def preview_main(args: list[str]) -> None:
    """``zoo preview``: a contact sheet of what the policy sees, from the data section only (`zoo.tools.preview`)."""
    from zoo.tools.preview import main as preview

    preview(args)


def pretext_bench_main(args: list[str]) -> None:
    """``zoo pretext-bench``: export the fixed-seed pretext benchmark (see `zoo.tools.pretext_bench`)."""
    from zoo.tools.pretext_bench import main as pretext_bench

    pretext_bench(args)


def chain_main(args: list[str]) -> None:
    """``zoo chain --config <chain.yaml>``: training stages in order, each from the last one's weights (see
    `zoo.chain`)."""
    from zoo.chain import main as chain

    chain(args)


def select_main(args: list[str]) -> None:
    """``zoo select``: keep the items a base policy neither always nor never solves (see `zoo.tools.select`)."""
    from zoo.tools.select import main as select

    select(args)


def repro_main(args: list[str]) -> None:
    """``zoo repro <claim>``: a small-scale paper reproduction on the CPU (see `zoo.tools.repro`)."""
    from zoo.tools.repro import main as repro

    repro(args)


COMMANDS = {"export": export_main, "list": list_main, "speed": speed_main, "bench": bench_main, "preview": preview_main,
            "pretext-bench": pretext_bench_main, "repro": repro_main, "chain": chain_main,
            "select": select_main}


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``zoo`` console script: `COMMANDS` by name, else LightningCLI's subcommands."""
    argv = sys.argv[1:] if args is None else args
    if argv and argv[0] in COMMANDS:
        COMMANDS[argv[0]](argv[1:])
        return
    cli(args)


if __name__ == "__main__":
    main()
