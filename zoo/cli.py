"""The ``zoo`` command: LightningCLI over policies (`zoo.PolicyModule`) and data modules, plus the
tools.

``zoo --help`` lists every command; ``zoo fit --config configs/quickstart.yaml``; ``zoo fit
--help``; ``zoo fit --print_config``; ``zoo export --ckpt <checkpoint> --out <dir>`` (a Hugging Face
directory); ``zoo list`` (models, tasks, sources); ``zoo speed`` (zoo vs TRL GRPOTrainer, same
settings); ``zoo repro <claim>`` (small-scale paper reproductions); ``zoo preview --config <yaml>``
(a contact sheet of what the policy sees); ``zoo pretext-bench export --out <dir>`` (the fixed-seed
pretext benchmark, evaluated with ``zoo test``); ``zoo chain --config <chain.yaml>`` (stages such as
an SFT cold start then GRPO, each from the last one's weights); ``zoo select --config <yaml>`` (keep
the items a base policy's pass rate varies on).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch import Callback, LightningDataModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.loggers import CSVLogger, Logger
from lightning.pytorch.strategies import Strategy
from lightning.pytorch.utilities import rank_zero_info, rank_zero_only, rank_zero_warn
from lightning.pytorch.utilities.exceptions import SIGTERMException

import datamodules  # noqa: F401  (short class names in configs)
import tasks  # noqa: F401
from callbacks import Checkpoints, GRPOMetrics, Predictions, RolloutSampler, StepProgress, TrainingCurves
from zoo.checkpoints import AtomicCheckpointIO, newest_loadable, unloadable
from zoo.errors import user_error
from zoo.export import as_pretrained, export
from zoo.interrupts import Interrupts, sigterm_without_collectives, stopped
from zoo.policy import PolicyModule
from zoo.preflight import check_gpu, check_not_shadowed, refuse_trainer_optimizer
from zoo.quiet import quiet
from zoo.threads import set_threads

#: Logger classes whose package is an optional extra: (import name, extra).
LOGGER_PACKAGES = {
    "TensorBoardLogger": ("tensorboard", "tensorboard"),
    "WandbLogger": ("wandb", "wandb"),
    "MLFlowLogger": ("mlflow", "mlflow"),
}
TRAINER_DEFAULTS = {
    "strategy": {"class_path": "zoo.grpo.GRPOStrategy"},
    "num_sanity_val_steps": 0,
    "log_every_n_steps": 10,
}
#: The Trainer's commands, as ``zoo --help`` and ``zoo <command> --help`` describe them.
TRAINER_COMMANDS = {
    "fit": "Train a policy with GRPO (validating before and during training) and checkpoint it.",
    "validate": "Score a policy (its configured weights or --ckpt_path) on the held-out validation set.",
    "test": "Score a policy on the held-out test set (distinct from validation) and write every prediction.",
    "predict": "Run Lightning's predict loop over the data module's predict set.",
}
RUN_OUTPUTS = (
    "A run writes to <trainer.default_root_dir, default runs>/lightning_logs/version_<n>/: config.yaml, "
    "metrics.csv, metrics.json, rollouts.jsonl, predictions.jsonl, curves.png and checkpoints/ "
    "(the final weights are always saved; --ckpt_path last resumes from the newest that loads). "
    "--debug (or ZOO_DEBUG=1) shows the traceback of an error; --verbose (or ZOO_VERBOSE=1) the "
    "third-party warnings zoo filters as harmless (zoo.quiet)."
)
#: ``ckpt_path`` values Lightning resolves itself (``last`` is resolved here, within the run's own
#: directory).
SPECIAL_CKPT_PATHS = ("best", "hpc", "registry")


class ZooTrainer(Trainer):
    """Lightning's Trainer with zoo's defaults: ``strategy`` typed as a Strategy class (not a
    registry name), so ``--trainer.strategy GRPODDPStrategy`` switches the class and keeps the GRPO
    settings of the config; outputs under ``default_root_dir``; checkpoints written atomically, the
    final weights always saved (`callbacks.Checkpoints`); a progress bar counting steps
    (`callbacks.StepProgress`).

    Args:
        strategy: A GRPO strategy (``zoo.grpo.GRPOStrategy``, ``GRPODDPStrategy``,
            ``GRPOFSDPStrategy``).
        default_root_dir: Where a run writes. The default logger (CSV) keeps ``config.yaml``,
            ``metrics.csv``, ``rollouts.jsonl``, ``predictions.jsonl``, ``metrics.json`` and
            ``checkpoints/`` in ``<default_root_dir>/lightning_logs/version_<n>/``; without a logger
            checkpoints go to ``<default_root_dir>/checkpoints``.
        logger: None: a CSV logger in ``default_root_dir``; False: none; or logger(s), which keep
            their own ``save_dir``.
        val_check_interval: Training steps between validations (an int), or the fraction of an epoch
            (a float); None: once per epoch.
        check_val_every_n_epoch: ``auto``: with an integer ``val_check_interval`` count its steps
            across epochs (Lightning's None), so any dataset size works, however few batches an
            epoch holds; otherwise validate every epoch (Lightning's 1).
        **kwargs: Arguments of `lightning.pytorch.Trainer`. Unless ``callbacks`` hold a checkpoint
            callback or a progress bar of their own, `callbacks.Checkpoints` and
            `callbacks.StepProgress` are added.
    """

    def __init__(
        self,
        strategy: Strategy,
        default_root_dir: str = "runs",
        logger: Logger | Iterable[Logger] | bool | None = None,
        val_check_interval: int | float | None = None,
        check_val_every_n_epoch: int | Literal["auto"] | None = "auto",
        **kwargs,
    ):
        if logger is None or logger is True:
            logger = CSVLogger(save_dir=default_root_dir)
        if check_val_every_n_epoch == "auto":
            steps = isinstance(val_check_interval, int) and not isinstance(val_check_interval, bool)
            check_val_every_n_epoch = None if steps else 1
        kwargs["callbacks"] = _with_default_callbacks(kwargs.get("callbacks"), kwargs)
        super().__init__(
            strategy=strategy,
            default_root_dir=default_root_dir,
            logger=logger,
            val_check_interval=val_check_interval,
            check_val_every_n_epoch=check_val_every_n_epoch,
            **kwargs,
        )
        if type(self.strategy.checkpoint_io) is TorchCheckpointIO:  # Lightning's default: stages in TMPDIR
            self.strategy.checkpoint_io = AtomicCheckpointIO()
        sigterm_without_collectives(self)


def _with_default_callbacks(callbacks, kwargs: dict) -> list[Callback]:
    """``callbacks`` plus zoo's checkpointing and progress bar where the user configured none of
    their own."""
    callbacks = [] if callbacks is None else [callbacks] if isinstance(callbacks, Callback) else list(callbacks)
    if kwargs.get("enable_checkpointing") is not False and not any(isinstance(c, ModelCheckpoint) for c in callbacks):
        callbacks.append(Checkpoints())
    if kwargs.get("enable_progress_bar") is not False and not any(isinstance(c, ProgressBar) for c in callbacks):
        callbacks.append(StepProgress())
    return callbacks


class StrictParser(LightningArgumentParser):
    """jsonargparse's parser (LightningCLI's) that refuses abbreviated option names
    (``--trainer.max_step`` is not ``max_steps``) and raises its errors, which `main` prints in one
    line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{"allow_abbrev": False, "exit_on_error": False, **kwargs})


class ZooCLI(LightningCLI):
    """LightningCLI with GRPO defaults: the single-device GRPO strategy, a CSV logger, the metrics,
    rollout, curves and predictions callbacks (configured under ``metrics:``, ``rollouts:``,
    ``curves:`` and ``predictions:``), and held-out validation before fit. ``--ckpt_path`` is
    checked before anything is built; ``last`` is the newest checkpoint of this configuration's run
    directory that loads."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(GRPOMetrics, "metrics")
        parser.add_lightning_class_args(RolloutSampler, "rollouts")
        parser.add_lightning_class_args(TrainingCurves, "curves")
        parser.add_lightning_class_args(Predictions, "predictions")
        parser.add_argument(
            "--validate_before_fit",
            type=bool,
            default=True,
            help="Run validation once before training, so the log starts with step-0 accuracy.",
        )

    def parse_arguments(self, parser, args) -> None:
        refuse_trainer_optimizer(sys.argv[1:] if args is None else args)
        super().parse_arguments(parser, args)
        config = self.config.get(self.config.get("subcommand") or "")
        ckpt_path = config.get("ckpt_path") if config else None
        if ckpt_path and ckpt_path != "last" and not str(ckpt_path).startswith(SPECIAL_CKPT_PATHS):
            reason = unloadable(ckpt_path)
            if reason:
                raise ValueError(
                    f"--ckpt_path {ckpt_path}: {reason}; give a checkpoint that zoo fit wrote "
                    "(a .ckpt file or a sharded folder), or `last`"
                )

    def _parse_ckpt_path(self) -> None:
        """LightningCLI merges a checkpoint's hyperparameters into the config; here only as data
        (`zoo.trust`): the class must be zoo's or the config's own, and ``trust_remote_code`` never
        comes from a checkpoint."""
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
        config = self.config.get(self.subcommand) if self.subcommand else self.config  # run=False: no subcommand
        if config is not None:
            if self.subcommand:  # a run, not a parse (run=False)
                check_gpu(config.get("trainer", {}))
            _check_logger_packages(config.get("trainer", {}).get("logger"))
            _export_checkpoint_as_pretrained(config.get("model"))

    def _start(self) -> None:
        """Before every command: resolve ``--ckpt_path last`` and say where the run writes."""
        config = self.config[self.subcommand]
        if config.get("ckpt_path") == "last":
            config.ckpt_path = self.config_init[self.subcommand]["ckpt_path"] = str(last_checkpoint(self.trainer))
        if rank_zero_only.rank == 0:
            rank_zero_info(f"[zoo] {self.subcommand}: this run writes to {self.trainer.log_dir}")

    before_validate = before_test = before_predict = _start

    def before_fit(self) -> None:
        self._start()
        config = self.config[self.subcommand]
        if config.get("validate_before_fit"):  # from the checkpoint's weights when resuming
            self.trainer.validate(
                self.model, datamodule=self.datamodule, ckpt_path=config.get("ckpt_path"), verbose=False
            )


def _check_logger_packages(logger) -> None:
    """A logger whose package is not installed: one clear line naming the extra, before anything is
    built."""
    loggers = logger if isinstance(logger, list) else [logger]
    for item in loggers:
        class_path = item.get("class_path", "") if hasattr(item, "get") else ""
        package, extra = LOGGER_PACKAGES.get(class_path.rsplit(".", 1)[-1], (None, None))
        if package and importlib.util.find_spec(package) is None:
            raise ModuleNotFoundError(
                f"trainer.logger {class_path} needs the {package!r} package: "
                f"pip install 'zoo[{extra}]' (or pip install {package})"
            )


def _export_checkpoint_as_pretrained(model) -> None:
    """A zoo checkpoint given as the policy's ``pretrained`` (an SFT cold start, say) becomes the
    Hugging Face directory it exports to, once (`zoo.export.as_pretrained`): the policy itself only
    loads directories."""
    init_args = model.get("init_args") if model is not None and hasattr(model, "get") else None
    pretrained = init_args.get("pretrained") if init_args is not None else None
    if isinstance(pretrained, str):
        init_args["pretrained"] = as_pretrained(pretrained)


def checkpoint_dirs(trainer: Trainer) -> list[Path]:
    """Where this configuration's runs keep checkpoints: the folders checkpoint callbacks were
    given, and ``checkpoints/`` of every version under the first logger's root (Lightning's layout),
    else of the trainer's root directory. Other experiments under the working directory are not
    looked at."""
    dirs = [Path(cb.dirpath) for cb in trainer.checkpoint_callbacks if cb.dirpath]
    if trainer.loggers:
        logger = trainer.loggers[0]
        root = Path(logger.save_dir or trainer.default_root_dir) / str(logger.name)
        dirs += sorted(root.glob("*/checkpoints"))
    else:
        dirs.append(Path(trainer.default_root_dir) / "checkpoints")
    return dirs


def last_checkpoint(trainer: Trainer) -> Path:
    """``--ckpt_path last``: the newest checkpoint in `checkpoint_dirs` that loads (a newer one that
    does not, e.g. cut short by a kill before zoo wrote atomically, is passed over with a
    warning)."""
    dirs = checkpoint_dirs(trainer)
    path, passed = newest_loadable(dirs)
    for skipped, reason in passed:
        rank_zero_warn(f"--ckpt_path last: passing over {skipped}, which does not load ({reason})")
    if path is None:
        shown = ", ".join(str(d) for d in dirs) or str(trainer.default_root_dir)
        raise FileNotFoundError(
            f"--ckpt_path last: no checkpoint that loads in {shown}; run zoo fit first "
            "(with this configuration's trainer.default_root_dir and logger) or give a path"
        )
    return path


def cli(args: list[str] | None = None, cli_class: type[ZooCLI] = ZooCLI, **kwargs) -> ZooCLI:
    """Build (and by default run) the CLI; ``kwargs`` go to `ZooCLI` (e.g. ``run=False`` in tests).
    Parse errors raise ``argparse.ArgumentError`` (`main` prints them in one line)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # data workers fork after tokenizer use
    parser_kwargs = {name: {"description": text, "epilog": RUN_OUTPUTS} for name, text in TRAINER_COMMANDS.items()}
    kwargs = {"parser_kwargs": parser_kwargs, **kwargs}
    return cli_class(
        PolicyModule,
        LightningDataModule,
        trainer_class=ZooTrainer,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        auto_configure_optimizers=False,  # the policy's optimizer argument sets it (zoo.preflight)
        parser_class=StrictParser,
        trainer_defaults=TRAINER_DEFAULTS,
        seed_everything_default=0,
        args=args,
        **kwargs,
    )


def export_checkpoint(*, ckpt: str, out: str, policy: list[str] | None = None) -> None:
    """Write a training checkpoint's policy as a Hugging Face directory (LoRA merged, processor
    included).

    Args:
        ckpt: A ``.ckpt`` file, or the folder a GRPOFSDPStrategy run saved.
        out: The output directory: model, processor and chat template, for ``from_pretrained``.
        policy: Import paths of the checkpoint's policy class when it is not one of zoo's (a
            checkpoint alone never makes zoo import a class).
    """
    print(f"[zoo] exported {ckpt} to {export(ckpt, out, policy or [])}")


#: The tools besides the Trainer's commands: ``module:attribute`` of a typed function, a dataclass
#: whose instance is called, or a dict of them (sub-commands, its ``_help`` the description), run by
#: `run_typed`.
COMMANDS = {
    "export": "zoo.cli:export_checkpoint",
    "list": "zoo.tools.catalog:list_catalog",
    "speed": "zoo.tools.speed:Speed",
    "plan": "zoo.tools.plan:plan",
    "preview": "zoo.tools.preview:preview",
    "pretext-bench": "zoo.tools.pretext_bench:COMMANDS",
    "repro": "zoo.tools.repro:repro",
    "chain": "zoo.chain:chain",
    "select": "zoo.tools.select:select",
    "build-base": "zoo.tools.perception_base:build_base",
}
#: Old command names: what ``zoo --help`` says of each, and the line ``zoo <name>`` answers with.
RENAMED = {
    "bench": (
        "Renamed: zoo speed; evaluation benchmarks run with zoo test.",
        "zoo bench is now zoo speed (zoo vs TRL: step time, tokens/s, memory); evaluation benchmarks "
        "run with zoo test --config configs/eval/<benchmark>.yaml, the pretext one is zoo pretext-bench",
    )
}
#: A parameter of a tool that takes every argument not its own, read as by ``zoo fit``
#: (`zoo.tools.preview`).
FIT_ARGS = "fit_args"


def command(name: str):
    """The typed component of tool ``name`` (imported on use)."""
    module, _, attribute = COMMANDS[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def summary(component) -> str:
    """The first line of a component's docstring (of ``_help`` for a dict of sub-commands)."""
    text = component.get("_help", "") if isinstance(component, dict) else inspect.getdoc(component) or ""
    return text.strip().splitlines()[0] if text.strip() else ""


def run_typed(prog: str, component, argv: list[str], run: bool = True):
    """Parse ``argv`` against the typed signature of ``component`` and run it (``run`` False: return
    the parsed keyword arguments instead, as the docs test checks commands); ``--help`` shows its
    docstring and each parameter's ``Args:`` entry, as for ``zoo fit``. Required positional
    parameters are positional arguments; a ``fit_args`` parameter receives every argument that is
    not one of the others."""
    import docstring_parser
    from jsonargparse import auto_cli

    if isinstance(component, dict):
        commands = {name: value for name, value in component.items() if name != "_help"}
        if argv and argv[0] in commands:
            return run_typed(f"{prog} {argv[0]}", commands[argv[0]], argv[1:], run)
        # no sub-command: --help lists them, anything else is an error naming them
        return auto_cli(
            commands,
            args=argv,
            as_positional=True,
            parser_class=StrictParser,
            prog=prog,
            description=component.get("_help", ""),
        )
    doc = docstring_parser.parse(inspect.getdoc(component) or "")
    prose = "\n\n".join(text for text in (doc.short_description, doc.long_description) if text)
    parser = StrictParser(prog=prog, description=prose)
    parameters = inspect.signature(component).parameters
    if inspect.isclass(component):
        parser.add_class_arguments(component, as_group=False)
    else:
        parser.add_function_arguments(component, as_group=False, as_positional=True, skip={FIT_ARGS})
    kwargs = {}
    if FIT_ARGS in parameters:
        argv, kwargs[FIT_ARGS] = _own_arguments(argv, set(parameters) - {FIT_ARGS})
        parser.epilog = next((f"{p.arg_name}: {p.description}" for p in doc.params if p.arg_name == FIT_ARGS), None)
    kwargs |= parser.instantiate_classes(parser.parse_args(argv)).as_dict()
    if not run:
        return kwargs
    return component(**kwargs)() if inspect.isclass(component) else component(**kwargs)


def _own_arguments(argv: list[str], names: set[str]) -> tuple[list[str], list[str]]:
    """``argv`` split into the options named ``names`` (``--name value`` or ``--name=value``, and
    --help) and the rest."""
    own = []
    rest = []
    i = 0
    while i < len(argv):
        name = argv[i].removeprefix("--").split("=", 1)[0]
        if argv[i] in ("-h", "--help") or (argv[i].startswith("--") and name in names):
            take = 1 if "=" in argv[i] or argv[i] in ("-h", "--help") else 2
            own, i = own + argv[i : i + take], i + take
        else:
            rest, i = rest + [argv[i]], i + 1
    return own, rest


def usage() -> str:
    """``zoo --help``: every command with its one-line description, and where a run writes."""
    tools = {name: summary(command(name)) for name in COMMANDS} | {name: text for name, (text, _) in RENAMED.items()}
    width = max(map(len, [*TRAINER_COMMANDS, *tools]))
    lines = [
        "usage: zoo <command> [options]        (zoo <command> --help: the options of a command)",
        "",
        "Training and evaluation (LightningCLI: --config <yaml>, dotted overrides such as --trainer.max_steps 100):",
    ]
    lines += [f"  {name:{width}}  {text}" for name, text in TRAINER_COMMANDS.items()]
    lines += ["", "Tools:"] + [f"  {name:{width}}  {text}" for name, text in tools.items()]
    return "\n".join([*lines, "", RUN_OUTPUTS])


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``zoo`` console script: `COMMANDS` by name, else LightningCLI's
    subcommands. A bad configuration, option or input ends in one line on stderr and exit status 1
    (2 for a bad option); ``--debug`` anywhere on the command line, or ``ZOO_DEBUG=1``, raises it
    with its traceback instead; third-party warnings known to be harmless are filtered
    (`zoo.quiet`) unless ``--verbose``, ``ZOO_VERBOSE=1`` or ``ZOO_DEBUG=1``. SIGTERM, or Ctrl+C
    (SIGINT), stops ``zoo fit`` after the step in progress, which is saved, with exit status 143
    or 130 (`STOPPED`): never 0, so schedulers and ``zoo chain`` do not take a preempted run for a
    finished one."""
    argv = sys.argv[1:] if args is None else list(args)
    debug = "--debug" in argv or os.environ.get("ZOO_DEBUG", "") not in ("", "0")
    verbose = debug or "--verbose" in argv or os.environ.get("ZOO_VERBOSE", "") not in ("", "0")
    if "--debug" in argv or "--verbose" in argv:
        flags = {"--debug": "ZOO_DEBUG", "--verbose": "ZOO_VERBOSE"}
        given = [flag for flag in flags if flag in argv]
        argv = [a for a in argv if a not in flags]
        if args is None:  # DDP ranks re-run this command line: they inherit the environment
            sys.argv[1:] = argv
            os.environ.update({flags[flag]: "1" for flag in given})
    quiet(verbose)
    command = argv[0] if argv and not argv[0].startswith("-") else ""
    prefix = f"zoo {command}" if command else "zoo"
    interrupts = Interrupts()
    try:
        with interrupts:
            check_not_shadowed()
            _dispatch(argv, None if args is None else argv)
    except (SIGTERMException, KeyboardInterrupt) as stop:
        received = interrupts.received or (signal.SIGINT if isinstance(stop, KeyboardInterrupt) else signal.SIGTERM)
        stopped(prefix, received, command == "fit")
    except SystemExit:
        if interrupts.received:  # a second Ctrl+C: Lightning exits with status 1
            stopped(prefix, interrupts.received, command == "fit")
        raise
    except Exception as err:
        message = None if debug else user_error(err)
        if message is None:
            raise
        hint = f"; see zoo {command} --help" if isinstance(err, argparse.ArgumentError) else ""
        print(f"{prefix}: error: {message}{hint} (--debug shows the traceback)", file=sys.stderr)
        raise SystemExit(2 if isinstance(err, argparse.ArgumentError) else 1) from None


def _dispatch(argv: list[str], args: list[str] | None) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        if not argv:
            raise SystemExit(2)
    elif argv[0] in COMMANDS:
        run_typed(f"zoo {argv[0]}", command(argv[0]), argv[1:])
    elif argv[0] in RENAMED:
        raise SystemExit(RENAMED[argv[0]][1])
    else:
        set_threads()  # the tools that train choose their own (zoo repro --threads)
        cli(args)


if __name__ == "__main__":
    main()
