"""Checkpoints are data, never code: a checkpoint that names a callable, a class that is no policy,
a module with import side effects, or smuggles ``trust_remote_code`` runs nothing under ``zoo
export``, ``fit``, ``validate`` or ``test``. Every payload here writes a marker file when it runs;
no marker may appear."""

import json
from pathlib import Path

import pytest
import torch
from lightning.pytorch import LightningDataModule

from zoo import PolicyModule
from zoo.cli import ZooCLI, ZooTrainer, cli, main
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
