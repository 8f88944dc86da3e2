"""`zoo list` finds every policy, task and source (a new file with no other edit) and the extras
they need."""

import gc
import importlib
import inspect
import sys
from pathlib import Path

import yaml

import datamodules
import tasks
import zoo
from datamodules.sources.base import Source
from tasks import Task
from tests.helpers import discover
from zoo import PolicyModule
from zoo.cli import main
from zoo.tools.catalog import CONFIG_KEYS, description, found, print_catalog, rows, snippet

QUICKSTART = str(Path(__file__).parents[2] / "configs" / "quickstart.yaml")
PROBE = '''
from tasks.base import Task


class ProbeTask(Task):
    """A task that exists only during this test."""

    name = "probe"
    modality = "audio"

    def make_example(self, item, rng):
        import soundfile  # an optional package: `zoo list` must name its extra

    def answer_text(self, example):
        return ""

    def score(self, example, answer):
        return None
'''


def test_list_prints_every_class_with_its_details(capsys):
    main(["list"])
    out = capsys.readouterr().out
    found = [*discover(zoo, PolicyModule), *discover(tasks, Task), *discover(datamodules, Source)]
    for cls in found:
        assert f"{cls.__module__}.{cls.__qualname__}" in out
    for cls in discover(zoo, PolicyModule):
        # its own row (another class's description may name it too)
        line = next(
            line for line in out.splitlines() if line.lstrip().startswith(f"{cls.__module__}.{cls.__qualname__}")
        )
        assert all(ckpt in line for ckpt in cls.tiny_checkpoints) and all(m in line for m in cls.content_kinds)
    table = rows()
    assert [r[1] for r in table["tasks"]] == [c.name for c in discover(tasks, Task)]
    assert all(r[3].count("*") == 1 for r in table["tasks"])  # the default answer format is marked
    video_sources = {r[0].rsplit(".", 1)[-1]: r[-1] for r in table["sources"] if r[1] == "video"}
    assert video_sources and all("video" in extras for extras in video_sources.values())


def test_a_new_task_file_is_listed_with_its_extra(tmp_path, monkeypatch):
    (tmp_path / "probe_task.py").write_text(PROBE)
    with monkeypatch.context() as patch:
        patch.setattr(tasks, "__path__", [*tasks.__path__, str(tmp_path)])
        try:
            with (tmp_path / "out.txt").open("w") as f:
                print_catalog(file=f)
        finally:
            sys.modules.pop("tasks.probe_task", None)
            vars(tasks).pop("probe_task", None)
    line = next(x for x in (tmp_path / "out.txt").read_text().splitlines() if "ProbeTask" in x)
    assert line.split() == ["tasks.probe_task.ProbeTask", "probe", "audio", "tags*/boxed/bare", "audio"]
    gc.collect()  # so the contract tests never see the probe class
    assert "ProbeTask" not in {c.__name__ for c in discover(tasks, Task)}


def test_every_entry_has_its_description_and_a_snippet_that_selects_it(capsys):
    main(["list"])
    lines = capsys.readouterr().out.splitlines()
    for section, classes in found().items():
        for cls in classes:
            at = next(i for i, line in enumerate(lines) if line.split()[:1] == [f"{cls.__module__}.{cls.__qualname__}"])
            assert lines[at + 1].strip() == description(cls) != "(no description)"
            key, _, value = lines[at + 2].strip().partition(": ")
            spec = yaml.safe_load(value)
            module, _, name = spec["class_path"].rpartition(".")
            assert key == CONFIG_KEYS[section] and getattr(importlib.import_module(module), name) is cls
            parameters = inspect.signature(cls.__init__).parameters.values()
            required = {
                p.name
                for p in parameters
                if p.default is p.empty and p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            }
            assert set(spec.get("init_args", {})) == required


def test_snippets_work_in_a_configuration_as_printed(capsys):
    from datamodules import ImageFolder
    from tasks import Jigsaw
    from tests.test_configs import parse_args
    from zoo import HFVLMPolicy

    config = parse_args(
        [
            "--config",
            QUICKSTART,
            "--model",
            snippet(HFVLMPolicy),
            "--data.init_args.tasks",
            f"[{snippet(Jigsaw)}]",
            "--data.init_args.source",
            snippet(ImageFolder),
        ]
    ).config
    assert config.model.class_path == "zoo.HFVLMPolicy" and config.model.init_args.pretrained == "tiny:idefics3"
    assert config.data.init_args.tasks[0].class_path == "tasks.Jigsaw"
    assert config.data.init_args.source.init_args.root == "<root>"
    main(["list", "--section", "tasks"])
    out = capsys.readouterr().out
    assert out.startswith("tasks:") and "models:" not in out and "sources:" not in out
