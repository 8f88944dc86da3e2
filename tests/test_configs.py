"""Every YAML under configs/ parses against the real signatures (typos fail here), without building
models."""

from argparse import ArgumentError
from pathlib import Path

import pytest

from zoo.cli import ZooCLI, cli

CONFIGS = sorted(
    str(p)
    for p in Path(__file__).parents[1].glob("configs/**/*.yaml")
    if p.parent.name in ("configs", "papers", "eval", "sft", "hybrid")
)


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
    assert "GRPO" in config.trainer.strategy.class_path or "SFT" in config.trainer.strategy.class_path


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
    assert config.trainer.accelerator == ("cpu" if group.endswith("cpu.yaml") else "gpu")


MODEL_GROUPS = sorted(str(p) for p in Path(__file__).parents[1].glob("configs/model/*.yaml"))


@pytest.mark.parametrize("group", MODEL_GROUPS, ids=lambda p: Path(p).name)
def test_model_groups_compose_with_an_experiment(group):
    quickstart = next(p for p in CONFIGS if p.endswith("quickstart.yaml"))
    config = parse_args(["--config", quickstart, "--model", group]).config
    assert config.model.class_path in ("zoo.QwenVLPolicy", "zoo.HFVLMPolicy")
    assert not config.model.init_args.pretrained.startswith("tiny:")
    assert config.trainer.strategy.init_args.num_generations == 8  # the experiment's settings survive


# AdamW weight decay of each paper's framework: TRL's default is 0, verl's and EasyR1's actor
# default is 0.01
PAPER_WEIGHT_DECAY = {
    "jigsaw_r1.yaml": 0.0,
    "r1_aqa.yaml": 0.0,
    "ui_shift.yaml": 0.0,
    "omni_audio_pretext.yaml": 0.0,
    "visual_jigsaw_image.yaml": 0.01,
    "visual_jigsaw_video.yaml": 0.01,
    "visual_jigsaw_3d.yaml": 0.01,
    "videossr.yaml": 0.01,
    "spatial_ssrl.yaml": 0.01,
    "spatial_ssrl_depth.yaml": 0.01,
    "ssl4rl_rotation.yaml": 0.01,
    "ssl4rl_jigsaw.yaml": 0.01,
    "ssl4rl_position.yaml": 0.01,
    "ssl4rl_contrastive.yaml": 0.01,
}
PAPERS = sorted(p for p in CONFIGS if "/papers/" in p)


def _paper(name):
    return parse(next(p for p in PAPERS if p.endswith("/" + name))).config


def _task(config, class_name):
    (task,) = [t.init_args for t in config.data.init_args.tasks if t.class_path == f"tasks.{class_name}"]
    return task


def test_every_paper_config_has_its_frameworks_weight_decay():
    assert {Path(p).name for p in PAPERS} == set(PAPER_WEIGHT_DECAY)
    for path in PAPERS:
        optimizer = parse(path).config.model.init_args.optimizer.init_args
        assert optimizer.weight_decay == PAPER_WEIGHT_DECAY[Path(path).name], path


def test_paper_configs_keep_the_recipe_parts_issue_22_added():
    jigsaw_r1 = _paper("jigsaw_r1.yaml")
    scheduler = jigsaw_r1.model.init_args.scheduler
    assert scheduler.class_path.endswith("LinearLR") and scheduler.init_args.end_factor == 0.0
    assert scheduler.init_args.total_iters == jigsaw_r1.trainer.max_steps
    assert _task(jigsaw_r1, "JigsawPair").shuffle_options and _task(jigsaw_r1, "JigsawPair").swap
    for name, task in [
        ("visual_jigsaw_image.yaml", "Jigsaw"),
        ("visual_jigsaw_video.yaml", "TemporalJigsaw"),
        ("visual_jigsaw_3d.yaml", "DepthOrder"),
    ]:
        assert _task(_paper(name), task).repetition_penalty == 0.5, name
    assert _paper("visual_jigsaw_video.yaml").data.init_args.source.init_args.min_seconds == 24.0
    for name in ("spatial_ssrl.yaml", "spatial_ssrl_depth.yaml"):
        config = _paper(name)
        assert (config.model.init_args.min_pixels, config.model.init_args.max_pixels) == (262144, 4194304)
        assert _task(config, "RegionalDepthOrder").separator == "dash"
    assert _task(_paper("videossr.yaml"), "ObjectCounting").parse == "numbers"
