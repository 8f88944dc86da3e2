"""The CLI says only what is so (issue 32): no optimizer options that cannot work, repro verdicts
within their budget, ``zoo list`` complete and pasteable, a shadowing ``zoo/`` folder named, chain
stages overridable, and the GPU groups' fix on a CPU machine."""

import importlib
import re
import shlex
import sys
import types
from pathlib import Path

import pytest
import yaml

from tests.test_configs import parse_args
from zoo.chain import load_chain, stage_command, stage_overrides, with_overrides
from zoo.cli import main
from zoo.tools import catalog
from zoo.tools.repro.common import Options, verdict_line

ROOT = Path(__file__).parents[1]


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code in (1, 2)
    return capsys.readouterr().err


def test_fit_offers_no_optimizer_option_and_names_the_policy_argument(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    shown = capsys.readouterr().out
    assert "--model CONFIG" in shown or "--model " in shown
    assert not re.search(r"^\s*--(optimizer|lr_scheduler)\b", shown, re.M)
    for option, argument in (("--optimizer", "optimizer"), ("--lr_scheduler.class_path", "scheduler")):
        err = _error(capsys, ["fit", "--config", "configs/quickstart.yaml", option, "Adam"])
        assert f"the policy's '{argument}' argument sets it (--model.init_args.{argument}" in err
        assert len(err.strip().splitlines()) == 1


def test_repro_below_the_declared_budget_is_inconclusive():
    rows = [{"steps": 2}, {"steps": 2}]
    assert Options(steps=150).budget == 150
    short = verdict_line(True, "0.00 vs 0.00", rows, budget=150)
    assert short == "verdict: inconclusive (ran 2 of the 150 steps the claim declares): 0.00 vs 0.00"
    assert verdict_line(True, "n", [{"steps": 150}], 150) == "verdict: held at this scale: n"
    assert verdict_line(False, "n", [{"steps": 150}], 150) == "verdict: did not hold at this scale: n"
    assert verdict_line(None, "n", [{"steps": 150}, {"steps": 150}], 150).startswith("verdict: not decided")


@pytest.fixture(scope="module")
def listing():
    return catalog.rows(), catalog.entries_by_section()


def test_list_has_every_section_and_tiny_model(listing):
    rows, entries = listing
    assert list(rows) == list(catalog.HEADERS) and set(entries) == set(rows)
    tiny = [row[0] for row in rows["tiny models"]]
    assert {"tiny:qwen2_5_vl_perception", "tiny:qwen2_5_vl_3b", "tiny:qwen2_5_vl", "tiny:qwen2"} <= set(tiny)
    strategies = {row[0].rsplit(".", 1)[1] for row in rows["strategies"]}
    assert {"GRPOStrategy", "GRPODDPStrategy", "GRPOFSDPStrategy", "SFTStrategy"} <= strategies
    assert "datamodules.base.PretextDataModule" in [row[0] for row in rows["data modules"]]
    assert "callbacks.curriculum.Curriculum" in [row[0] for row in rows["callbacks"]]


def test_list_descriptions_are_whole_sentences():
    from zoo import HFVLMPolicy

    # the docstring's first sentence has a ':' in it; the description is not cut there
    assert catalog.description(HFVLMPolicy).startswith("A Hugging Face vision-language policy loaded with")
    assert len(catalog.description(HFVLMPolicy)) > 80
    assert catalog._first_sentence("Sums a; b: c, e.g. this. Then more.") == "Sums a; b: c, e.g. this."


def test_every_list_snippet_parses_as_yaml_and_names_an_importable_class(listing):
    _, entries = listing
    for section, items in entries.items():
        for _, text in items:
            value = yaml.safe_load(f"{catalog.CONFIG_KEYS[section]}: {text}")[catalog.CONFIG_KEYS[section]]
            module, _, name = value["class_path"].rpartition(".")
            assert isinstance(getattr(importlib.import_module(module), name), type), text


def test_a_zoo_folder_shadowing_the_package_is_named(monkeypatch, tmp_path, capsys):
    shadow = types.ModuleType("zoo")
    shadow.__file__, shadow.__path__ = None, [str(tmp_path / "zoo")]
    monkeypatch.setitem(sys.modules, "zoo", shadow)
    err = _error(capsys, ["list"])
    assert f"a folder named zoo/ at {tmp_path / 'zoo'} shadows the zoo package; rename it" in err


def test_chain_stages_are_overridden_from_the_command_line(tmp_path):
    extra = stage_overrides(["--sft.trainer.max_steps", "10", "--grpo.trainer.max_steps=20"], ["sft", "grpo"])
    assert extra == {"sft": ["--trainer.max_steps", "10"], "grpo": ["--trainer.max_steps=20"]}
    chain = tmp_path / "chain.yaml"
    chain.write_text(
        f"stages:\n  - {{name: sft, config: {ROOT}/configs/sft/rotation.yaml, args: [--trainer.max_steps, '60']}}\n"
        f"  - {{name: grpo, config: {ROOT}/configs/quickstart.yaml}}\n"
    )
    sft, grpo = with_overrides(load_chain(str(chain))[1], ["--sft.trainer.max_steps", "10"])
    assert (sft["args"], grpo["args"]) == (["--trainer.max_steps", "60", "--trainer.max_steps", "10"], [])
    command = stage_command(sft, tmp_path, None)
    assert command.index("10") > command.index("60")  # the override comes last, so it wins
    with pytest.raises(ValueError, match=r"the stages being \['sft', 'grpo'\]"):
        stage_overrides(["--rl.trainer.max_steps", "1"], ["sft", "grpo"])
    with pytest.raises(ValueError, match="needs a value"):
        stage_overrides(["--sft.trainer.max_steps"], ["sft"])


def test_gpu_group_on_a_machine_without_gpu_names_the_cpu_group(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    argv = ["fit", "--config", "configs/quickstart.yaml", "--trainer", "configs/trainer/gpu1.yaml"]
    err = _error(capsys, argv)
    assert "no GPU found: this config asks for accelerator gpu; add --trainer configs/trainer/cpu.yaml" in err


def test_readme_cpu_smoke_recipe_parses_and_keeps_the_papers_settings():
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if "--trainer configs/trainer/cpu.yaml" in x and "tiny:" in x]
    args = shlex.split(line)
    assert args[:2] == ["zoo", "fit"]
    config = parse_args(args[2:]).config
    strategy = config.trainer.strategy
    assert (config.trainer.accelerator, config.trainer.devices, config.trainer.precision) == ("cpu", 1, "32-true")
    assert strategy.class_path == "zoo.grpo.GRPOStrategy" and config.trainer.max_steps == 3
    assert (strategy.init_args.max_new_tokens, strategy.init_args.num_generations) == (32, 5)  # 5: the paper's
