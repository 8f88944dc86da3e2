"""Every YAML under configs/ parses against the real signatures (typos fail here), without building models."""

from argparse import ArgumentError
from pathlib import Path

import pytest

from zoo.cli import ZooCLI, cli

CONFIGS = sorted(str(p) for p in Path(__file__).parents[1].glob("configs/**/*.yaml")
                 if p.parent.name in ("configs", "papers", "eval"))


class ParseOnly(ZooCLI):
    def instantiate_classes(self) -> None:
        """Parsing is the test; building sources would need the papers' datasets."""


def parse_args(args: list[str]):
    return cli(args, run=False, cli_class=ParseOnly)


def parse(path: str):
    return parse_args(["--config", path])


def test_configs_are_found():
    assert any(p.endswith("quickstart.yaml") for p in CONFIGS) and any("/papers/" in p for p in CONFIGS)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: Path(p).name)
def test_config_parses(path):
    config = parse(path).config
    assert config.model.class_path.startswith("zoo.")
    assert config.data.class_path.startswith("datamodules.")
    assert "GRPO" in config.trainer.strategy.class_path


def test_a_typo_fails_at_parse_time(tmp_path):
    quickstart = next(p for p in CONFIGS if p.endswith("quickstart.yaml"))
    (tmp_path / "good.yaml").write_text(Path(quickstart).read_text())
    parse(str(tmp_path / "good.yaml"))
    (tmp_path / "bad.yaml").write_text(Path(quickstart).read_text().replace("max_new_tokens", "max_new_tokenz"))
    with pytest.raises(ArgumentError, match="max_new_tokenz"):
        parse(str(tmp_path / "bad.yaml"))


TRAINER_GROUPS = sorted(str(p) for p in Path(__file__).parents[1].glob("configs/trainer/*.yaml"))


@pytest.mark.parametrize("group", TRAINER_GROUPS, ids=lambda p: Path(p).name)
def test_trainer_groups_compose_with_an_experiment(group):
    quickstart = next(p for p in CONFIGS if p.endswith("quickstart.yaml"))
    config = parse_args(["--config", quickstart, "--trainer", group]).config
    strategy = config.trainer.strategy
    assert strategy.class_path.startswith("zoo.grpo.GRPO")
    # the experiment's GRPO settings survive the change of strategy class
    assert strategy.init_args.max_new_tokens == 1 and strategy.init_args.num_generations == 8
    assert config.trainer.accelerator == "gpu"


MODEL_GROUPS = sorted(str(p) for p in Path(__file__).parents[1].glob("configs/model/*.yaml"))


@pytest.mark.parametrize("group", MODEL_GROUPS, ids=lambda p: Path(p).name)
def test_model_groups_compose_with_an_experiment(group):
    quickstart = next(p for p in CONFIGS if p.endswith("quickstart.yaml"))
    config = parse_args(["--config", quickstart, "--model", group]).config
    assert config.model.class_path in ("zoo.QwenVLPolicy", "zoo.HFVLMPolicy")
    assert not config.model.init_args.pretrained.startswith("tiny:")
    assert config.trainer.strategy.init_args.num_generations == 8  # the experiment's settings survive
