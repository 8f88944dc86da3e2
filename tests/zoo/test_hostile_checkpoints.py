"""Checkpoints are data, never code: a checkpoint that names a callable, a class that is no policy,
a module with import side effects, or smuggles ``trust_remote_code`` runs nothing under ``zoo
export``, ``fit``, ``validate`` or ``test``. Every payload here writes a marker file when it runs;
no marker may appear."""

import json
import pickle
import re
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch import LightningDataModule

from zoo import PolicyModule
from zoo.checkpoints import unloadable
from zoo.cli import ZooCLI, ZooTrainer, cli, last_checkpoint, main
from zoo.grpo import GRPOFSDPStrategy, GRPOStrategy
from zoo.trust import checkpoint_model, policy_class

ROOT = Path(__file__).parents[2]
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
COMMANDS = ["fit", "validate", "test"]
QUICK = [
    "--trainer.max_steps",
    "1",
    "--data.init_args.val_size",
    "2",
    "--data.init_args.batch_size",
    "2",
    "--trainer.strategy.init_args.num_generations",
    "2",
]


def write_checkpoint(path: Path, hparams: dict, **extra) -> Path:
    """A checkpoint as Lightning writes one (loads with ``weights_only=True``), carrying
    ``hparams``."""
    torch.save({"state_dict": {}, "hyper_parameters": hparams, "epoch": 0, "global_step": 0, **extra}, path)
    return path


def remote_code_model(folder: Path, marker: Path) -> Path:
    """A model folder whose config needs its own Python file, which writes ``marker`` when
    imported."""
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "payload", "auto_map": {"AutoConfig": "payload.PayloadConfig"}})
    )
    (folder / "payload.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('remote code ran')\n"
        "from transformers import PretrainedConfig\n\n\nclass PayloadConfig(PretrainedConfig):\n"
        "    model_type = 'payload'\n"
    )
    return folder


def hostile(kind: str, tmp_path: Path, marker: Path, monkeypatch) -> Path:
    """A checkpoint of one kind of attack, each of which writes ``marker`` if it gets to run."""
    if kind == "callable":  # `zoo export` used to call it: os.system(command=...)
        hparams = {"_class_path": "os.system", "command": f"touch {marker}"}
    elif kind == "not_a_policy":  # a class whose construction writes a file
        hparams = {"_class_path": "logging.FileHandler", "filename": str(marker)}
    elif kind == "import_side_effect":  # a module on the path that runs code when imported
        (tmp_path / "payload_module.py").write_text(
            f"open({str(marker)!r}, 'w').write('imported')\nclass Policy: pass\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        hparams = {"_class_path": "payload_module.Policy"}
    else:  # trust_remote_code smuggled in with one of zoo's own classes
        model = remote_code_model(tmp_path / "model", marker)
        hparams = {"_class_path": "zoo.HFVLMPolicy", "pretrained": str(model), "trust_remote_code": True}
    return write_checkpoint(tmp_path / f"{kind}.ckpt", hparams)


#: What each attack ends in: zoo refuses the class, or transformers refuses code it was not allowed
#: to run.
REFUSAL = {
    "callable": "not one of zoo's policies",
    "not_a_policy": "not one of zoo's policies",
    "import_side_effect": "not one of zoo's policies",
    "remote_code": "trust_remote_code",
}
KINDS = list(REFUSAL)


@pytest.mark.parametrize("kind", KINDS)
def test_export_of_a_hostile_checkpoint_runs_nothing(kind, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    ckpt = hostile(kind, tmp_path, marker, monkeypatch)
    with pytest.raises(ValueError, match=REFUSAL[kind]):  # --debug: raised, not printed as zoo's one line
        main(["export", "--ckpt", str(ckpt), "--out", str(tmp_path / "hf"), "--debug"])
    assert not marker.exists()
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", KINDS)
def test_fit_validate_test_from_a_hostile_checkpoint_run_nothing(command, kind, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    ckpt = hostile(kind, tmp_path, marker, monkeypatch)
    monkeypatch.chdir(tmp_path)
    # refused with a one-line reason before anything is built (not Lightning's parser dump), or, for
    # remote code, the policy loads without it and transformers refuses the folder
    with pytest.raises(ValueError, match=REFUSAL[kind]):
        cli([command, "--config", QUICKSTART, *QUICK, "--ckpt_path", str(ckpt)])
    assert not marker.exists()


def test_a_checkpoint_may_name_zoos_policies_and_the_class_the_config_names():
    assert policy_class("zoo.QwenVLPolicy").__name__ == "QwenVLPolicy"
    assert policy_class("zoo.qwen_vl.QwenVLPolicy") is policy_class("zoo.QwenVLPolicy")
    # a class of the user's own (here a test-local subclass) only when their config names it
    with pytest.raises(ValueError, match="not one of zoo's policies"):
        policy_class("tests.zoo.test_hostile_checkpoints.OwnPolicy")
    assert (
        policy_class(
            "tests.zoo.test_hostile_checkpoints.OwnPolicy", allowed=["tests.zoo.test_hostile_checkpoints.OwnPolicy"]
        )
        is OwnPolicy
    )
    # named by the config but no PolicyModule: still refused
    with pytest.raises(ValueError, match="not a PolicyModule"):
        policy_class("logging.FileHandler", allowed=["logging.FileHandler"])


def test_only_plain_data_of_a_checkpoint_reaches_the_config():
    hparams = {
        "_class_path": "zoo.HFVLMPolicy",
        "_instantiator": "lightning.pytorch.cli.instantiate_module",
        "pretrained": "tiny:idefics3",
        "trust_remote_code": True,
        "processor_kwargs": {"trust_remote_code": True, "size": {"longest_edge": 64}},
        "optimizer": {"class_path": "os.system"},
        "freeze": ["vision"],
    }
    model = checkpoint_model(hparams, "zoo.QwenVLPolicy")
    assert model == {
        "class_path": "zoo.hf_vlm.HFVLMPolicy",
        "dict_kwargs": {
            "pretrained": "tiny:idefics3",
            "processor_kwargs": {"size": {"longest_edge": 64}},
            "freeze": ["vision"],
        },
    }
    assert checkpoint_model({}, "zoo.QwenVLPolicy") is None


def test_the_users_own_trust_remote_code_survives_a_resume(tmp_path, monkeypatch):
    """The user opted in on the command line: the checkpoint (which says False) cannot take it back,
    as it cannot grant it (`test_fit_validate_test_from_a_hostile_checkpoint_run_nothing`)."""
    ckpt = write_checkpoint(
        tmp_path / "own.ckpt",
        {
            "_class_path": "zoo.HFVLMPolicy",
            "pretrained": "tiny:idefics3",
            "trust_remote_code": False,
            "freeze": ["vision"],
        },
    )
    monkeypatch.chdir(tmp_path)
    args = [
        "fit",
        "--config",
        QUICKSTART,
        "--model",
        "zoo.HFVLMPolicy",
        "--model.init_args.pretrained",
        "tiny:idefics3",
        "--model.init_args.trust_remote_code",
        "true",
        "--ckpt_path",
        str(ckpt),
    ]
    model = ParseOnly(args=args).config.fit.model
    assert model.init_args.trust_remote_code is True
    assert model.init_args.freeze == ["vision"]  # the checkpoint's plain data still applies


class ParseOnly(ZooCLI):
    """The CLI up to its parsed config (checkpoint hyperparameters merged): nothing built, nothing
    run."""

    def __init__(self, args):
        super().__init__(
            PolicyModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            trainer_class=ZooTrainer,
            args=args,
        )

    def instantiate_classes(self) -> None:
        pass

    def _run_subcommand(self, subcommand: str) -> None:
        pass


class OwnPolicy(PolicyModule):
    """A user's own policy class, outside zoo.

    Args:
        pretrained: Unused.
    """

    def load(self, path):
        raise NotImplementedError

    def encode(self, examples):
        raise NotImplementedError


# ---- sharded (folder) checkpoints: torch's loader unpickles `.metadata` with plain pickle -------


class Payload:
    """Pickled into a sharded checkpoint's ``.metadata``: plain ``pickle`` would call
    ``write_text(marker)``, through a function of its own or a method of a class the metadata may
    name (``PosixPath``)."""

    def __init__(self, marker: Path, through: str):
        self.marker = marker
        self.through = through

    def __reduce__(self):
        write = Path.write_text if self.through == "Path" else type(self.marker).write_text
        return write, (self.marker, "ran")


def hostile_folder(tmp_path: Path, marker: Path, through: str = "Path") -> Path:
    """A folder checkpoint as `zoo.grpo.GRPOFSDPStrategy` writes one (``.metadata`` and a loadable
    ``meta.pt``) whose ``.metadata`` carries `Payload`."""
    folder = tmp_path / "evil.ckpt"
    folder.mkdir()
    (folder / ".metadata").write_bytes(pickle.dumps(Payload(marker, through)))
    hparams = {"_class_path": "zoo.QwenVLPolicy", "pretrained": "tiny:qwen2_5_vl"}
    torch.save({"hyper_parameters": hparams, "epoch": 0, "global_step": 1}, folder / "meta.pt")
    return folder


SURFACES = ["export", "ckpt_path", "pretrained", "last", "unloadable", "strategy"]


@pytest.mark.parametrize("through", ["Path", "PosixPath"])
@pytest.mark.parametrize("surface", SURFACES)
def test_a_sharded_checkpoint_runs_no_pickled_code(surface, through, tmp_path, monkeypatch, capsys):
    marker = tmp_path / "pwned"
    folder = hostile_folder(tmp_path, marker, through)
    monkeypatch.chdir(tmp_path)
    refused = r"\.metadata.*refused"
    if surface == "export":
        with pytest.raises(SystemExit) as exit_info:
            main(["export", "--ckpt", f"{folder}/", "--out", str(tmp_path / "hf")])
        (line,) = capsys.readouterr().err.splitlines()
        assert exit_info.value.code == 1 and re.search(refused, line), line
    elif surface in ("ckpt_path", "pretrained"):  # refused before a model is built
        option = "--ckpt_path" if surface == "ckpt_path" else "--model.init_args.pretrained"
        with pytest.raises(ValueError, match=refused):
            cli(["fit", "--config", QUICKSTART, *QUICK, option, f"{folder}/"])
    elif surface == "last":
        checkpoints = tmp_path / "runs" / "checkpoints"
        checkpoints.mkdir(parents=True)
        folder.rename(checkpoints / folder.name)
        trainer = ZooTrainer(strategy=GRPOStrategy(), logger=False, default_root_dir="runs", enable_progress_bar=False)
        with pytest.raises(FileNotFoundError), pytest.warns(UserWarning, match=f"evil.ckpt.*{refused}"):
            last_checkpoint(trainer)
    elif surface == "unloadable":
        assert re.search(refused, unloadable(folder))
    else:  # what Lightning's FSDP2 strategy does with a folder: torch.distributed.checkpoint.load
        with pytest.raises(ValueError, match=refused):
            GRPOFSDPStrategy().load_checkpoint(folder)
    assert not marker.exists()


@pytest.mark.parametrize("parameter", ["engine", "lora"])
def test_a_checkpoint_never_makes_the_parser_import_a_module(parameter, tmp_path, monkeypatch, capsys):
    """A plain string given to a class-typed parameter: jsonargparse imports the module it names
    before refusing the value (``this`` prints the Zen of Python)."""
    marker = tmp_path / "pwned"
    (tmp_path / "payload_module.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\nclass X: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "this", raising=False)
    value = "this.Engine" if parameter == "engine" else "payload_module.X"
    hparams = {"_class_path": "zoo.QwenVLPolicy", "pretrained": "tiny:qwen2_5_vl", "freeze": ["vision"]}
    ckpt = write_checkpoint(tmp_path / "import.ckpt", {**hparams, parameter: value})
    monkeypatch.chdir(tmp_path)
    model = ParseOnly(args=["fit", "--config", QUICKSTART, "--ckpt_path", str(ckpt)]).config.fit.model
    assert "this" not in sys.modules and not marker.exists()
    assert "Beautiful is better than ugly" not in capsys.readouterr().out
    assert model.init_args[parameter] is None  # the config's own value; the checkpoint's is dropped
    assert model.init_args.freeze == ["vision"]  # plain data of plain-typed parameters still applies


def test_only_values_of_plain_typed_parameters_come_from_a_checkpoint():
    """An allow-list by the policy's signature: str, int, float, bool, None, lists and dicts of
    them, and dataclasses of those (`zoo.lora.LoRA`) given as a dict; a value of another type is
    dropped too."""
    hparams = {
        "_class_path": "zoo.QwenVLPolicy",
        "pretrained": "tiny:qwen2_5_vl",
        "engine": "this.Engine",
        "lora": {"rank": 4, "groups": ["llm"]},
        "min_pixels": "os.system",
        "max_pixels": 4096,
        "freeze": ["vision", {"class_path": "os.system"}],
        "not_a_parameter": "x",
        "trim_padding": False,
    }
    assert checkpoint_model(hparams, None)["dict_kwargs"] == {
        "pretrained": "tiny:qwen2_5_vl",
        "lora": {"rank": 4, "groups": ["llm"]},
        "max_pixels": 4096,
        "trim_padding": False,
    }
    assert "lora" not in checkpoint_model({**hparams, "lora": "payload_module.X"}, None)["dict_kwargs"]
    assert "lora" not in checkpoint_model({**hparams, "lora": {"rank": 4, "code": "x"}}, None)["dict_kwargs"]


# ---- a checkpoint whose pretrained leads back to itself ------------------------------------------


@pytest.mark.parametrize("cycle", ["itself", "each_other"])
@pytest.mark.parametrize("surface", ["export", "pretrained"])
def test_a_checkpoint_that_starts_from_itself_is_refused_in_one_line(cycle, surface, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    first = tmp_path / "first.ckpt"
    second = tmp_path / "second.ckpt"
    names = {first: first if cycle == "itself" else second, second: first}
    for ckpt, pretrained in names.items():
        write_checkpoint(ckpt, {"_class_path": "zoo.QwenVLPolicy", "pretrained": str(pretrained)})
    monkeypatch.chdir(tmp_path)
    loop = "first.ckpt -> first.ckpt" if cycle == "itself" else "first.ckpt -> second.ckpt -> first.ckpt"
    if surface == "export":
        with pytest.raises(SystemExit) as exit_info:
            main(["export", "--ckpt", str(first), "--out", str(tmp_path / "hf")])
        (line,) = capsys.readouterr().err.splitlines()
        assert exit_info.value.code == 1 and "starts from itself" in line and loop in line, line
    else:
        with pytest.raises(ValueError, match=f"starts from itself.*{loop}"):
            cli(["fit", "--config", QUICKSTART, *QUICK, "--model.init_args.pretrained", str(first)])
    leftovers = list((tmp_path / "cache").rglob("*"))
    assert all(p.is_dir() and p.name == "checkpoints" for p in leftovers), leftovers  # no temporary folder
