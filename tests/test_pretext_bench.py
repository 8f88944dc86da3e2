"""The pretext benchmark: every task has levels, an export is self-contained and byte-reproducible,
and reading it back (`datamodules.pretext_bench.PretextBench`, ``zoo test``) scores per task and
level without regenerating."""

import csv
import json
import logging
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

import tasks
from datamodules.bench_export import (
    DEFAULT_SOURCES,
    build_source,
    default_source_spec,
    export,
    held_out,
    levelled_tasks,
    select,
)
from datamodules.bench_files import read_wav, wav_bytes
from datamodules.pretext_bench import PretextBench
from tasks import Task, answers
from tasks.base import level_id
from tests.helpers import discover, make_item
from zoo.cli import main
from zoo.tools.pretext_bench import export_benchmark, report

# one task level per modality the default sources cover (image, video, RGB-D, points, audio, GUI,
# frame pairs)
MIXED = [
    "jigsaw@3x3",
    "contrastive@strong",
    "temporal_jigsaw@4clips",
    "depth_order@3points",
    "pointcloud_jigsaw@3slabs",
    "audio_jigsaw@4segments",
    "gui_inverse_dynamics@type",
    "embodied_inverse_dynamics@default",
]


LEVELLED = levelled_tasks()


def unlevelled(classes: list[type]) -> list[str]:
    """Task classes without a levels table, or with none though a default (synthetic) source makes
    their items."""
    return [
        cls.__name__
        for cls in classes
        if not isinstance(getattr(cls, "levels", None), dict) or (not cls.levels and cls.modality in DEFAULT_SOURCES)
    ]


def test_every_task_states_its_levels():
    found = discover(tasks, Task)
    assert not unlevelled(found), "set levels on the class ({} only for a task on labelled data)"
    assert set(LEVELLED) == {cls for cls in found if cls.levels}

    class Unlevelled(Task):  # what a new task file without levels looks like to the check above
        name, modality = "new_task", "image"

    class Unmade(Unlevelled):
        levels = {}

    assert unlevelled([*found, Unlevelled, Unmade]) == ["Unlevelled", "Unmade"]


@pytest.mark.parametrize("cls", LEVELLED, ids=lambda c: c.__name__)
def test_every_level_makes_examples_a_perfect_answer_solves(cls):
    for level in cls.levels:
        task = cls(**cls.level_arguments(level))
        level_id(cls.name, level)  # a valid, path-safe name
        item = make_item(cls.modality)
        item = [item, make_item(cls.modality, 1)] if cls.partners else item
        example = task.make_example(item, random.Random(0))
        assert task.verify(example, task.render_answer(example)).total == pytest.approx(task.max_reward), level


def test_level_arguments_put_the_level_over_the_common_options():
    assert tasks.Jigsaw.level_arguments("3x3", answer_format="bare", rows=9) == {
        "answer_format": "bare",
        "rows": 3,
        "cols": 3,
    }
    with pytest.raises(KeyError, match="5x5"):
        tasks.Jigsaw.level_arguments("5x5")
    with pytest.raises(KeyError, match="labelled"):
        tasks.MultipleChoice.level_arguments("default")
    with pytest.raises(ValueError, match="level name"):
        level_id("jigsaw", "3x3/../x")


def test_the_default_sources_serve_every_level(tmp_path):
    manifest = export(str(tmp_path), select(), n=1, seed=0)
    sets = json.loads(manifest.read_text())["sets"]
    assert len(sets) == sum(len(cls.levels) for cls in LEVELLED)
    assert all(entry["examples"] == 1 for entry in sets.values())
    bench = PretextBench(str(tmp_path))
    assert sorted(ex.task for batch in bench.test_dataloader() for ex in batch) == sorted(sets)


def test_select_by_name_level_and_id():
    assert select(["jigsaw"]) == [(tasks.Jigsaw, "2x2"), (tasks.Jigsaw, "3x3"), (tasks.Jigsaw, "4x4")]
    assert select(["Jigsaw", "temporal_jigsaw"], ["3x3", "6clips"]) == [
        (tasks.Jigsaw, "3x3"),
        (tasks.TemporalJigsaw, "6clips"),
    ]
    assert select(["depth_order@6points"]) == [(tasks.DepthOrder, "6points")]
    with pytest.raises(ValueError, match="jigsaw@5x5"):
        select(["jigsaw@5x5"])
    with pytest.raises(ValueError, match="9clips"):
        select(["temporal_jigsaw"], ["9clips"])


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    main(["pretext-bench", "export", "--out", str(out), "--tasks", json.dumps(MIXED), "--n", "3", "--seed", "0"])
    return out


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _same(a, b) -> bool:
    if isinstance(a, Image.Image):
        return isinstance(b, Image.Image) and a.size == b.size and a.tobytes() == b.convert(a.mode).tobytes()
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def test_export_writes_a_manifest_and_reads_back_the_same_examples(mixed):
    manifest = json.loads((mixed / "manifest.json").read_text())
    assert manifest["seed"] == 0 and manifest["examples_per_set"] == 3 and manifest["zoo_version"]
    assert sorted(manifest["sets"]) == sorted(MIXED)
    bench = PretextBench(str(mixed), batch_size=2)
    read = {ex.uid: ex for batch in bench.test_dataloader() for ex in batch}
    assert len(read) == 3 * len(MIXED) and not bench.skipped
    for name, entry in manifest["sets"].items():
        assert entry["examples"] == 3 and entry["task"]["class_path"].startswith("tasks.")
        spec = entry["source"]
        task = bench.tasks[name]
        assert spec == default_source_spec(task.modality, 0)
        # regenerate in memory: the read-back prompt, truth and every medium equal what the task
        # made
        data = held_out(type(task)(**entry["task"]["init_args"]), build_source(spec), 3, 0)
        made = [ex for batch in data.val_dataloader() for ex in batch]
        for i, original in enumerate(made):
            back = read[f"{name}:{i}"]
            assert back.task == name and back.prompt_text == original.prompt_text
            assert json.dumps(back.answer) == json.dumps(original.answer)
            assert json.dumps(back.meta, sort_keys=True) == json.dumps(original.meta, sort_keys=True)
            pairs = [
                (p, q)
                for m, n in zip(original.messages, back.messages, strict=True)
                for p, q in zip(m["content"], n["content"], strict=True)
            ]
            assert all(p.keys() == q.keys() and all(_same(p[k], q[k]) for k in p) for p, q in pairs), name


def test_a_perfect_completion_scores_one_and_a_wrong_one_zero_through_the_read_back(mixed):
    bench = PretextBench(str(mixed), tasks=["jigsaw", "audio_jigsaw@4segments", "gui_inverse_dynamics"])
    assert sorted(bench.tasks) == ["audio_jigsaw@4segments", "gui_inverse_dynamics@type", "jigsaw@3x3"]
    lines = {
        json.loads(line)["uid"]: json.loads(line)
        for name in bench.tasks
        for line in (mixed / name / "examples.jsonl").read_text().splitlines()
    }
    examples = [ex for batch in bench.test_dataloader() for ex in batch]
    assert len(examples) == 9
    for example in examples:
        task = bench.tasks[example.task]
        perfect = answers.wrap(lines[example.uid]["expected"], task.answer_format, task.think)
        assert bench.verify(example, perfect).parts["accuracy"] == 1.0
        for wrong in ("", "<answer>1, 1, 1</answer>", "<answer>zzz</answer>"):
            assert bench.verify(example, wrong).parts["accuracy"] == 0.0


def test_the_same_seed_exports_byte_identical_files_and_another_seed_differs(mixed, tmp_path):
    again, other = tmp_path / "again", tmp_path / "other"
    main(["pretext-bench", "export", "--out", str(again), "--tasks", json.dumps(MIXED), "--n", "3", "--seed", "0"])
    assert files(again) == files(mixed)
    main(["pretext-bench", "export", "--out", str(other), "--tasks", "[jigsaw@3x3]", "--n", "3", "--seed", "1"])
    assert files(other)["jigsaw@3x3/examples.jsonl"] != files(mixed)["jigsaw@3x3/examples.jsonl"]


def test_a_source_option_replaces_the_default_of_its_modality(tmp_path):
    spec = "{class_path: SyntheticScenes, init_args: {image_size: 64, seed: 5}}"
    main(
        [
            "pretext-bench",
            "export",
            "--out",
            str(tmp_path),
            "--tasks",
            "[rotation@4way]",
            "--n",
            "2",
            "--source+",
            spec,
            "--answer_format",
            "bare",
        ]
    )
    entry = json.loads((tmp_path / "manifest.json").read_text())["sets"]["rotation@4way"]
    assert entry["source"] == {"class_path": "SyntheticScenes", "init_args": {"image_size": 64, "seed": 5}}
    assert entry["task"]["init_args"]["answer_format"] == "bare"
    (example, _) = next(iter(PretextBench(str(tmp_path), batch_size=2).test_dataloader()))
    assert example.messages[0]["content"][0]["image"].size == (64, 64)
    with pytest.raises(ValueError, match="no chosen task takes"):
        export_benchmark(out=str(tmp_path), tasks=["audio_jigsaw"], source=["SyntheticScenes"])


def test_corrupt_missing_and_altered_files_are_skipped_counted_and_logged(mixed, tmp_path, caplog):
    root = tmp_path / "bench"
    for name, data in files(mixed).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "jigsaw@3x3/media/000000-0.png").write_bytes(b"\x89PNG not really")  # corrupt
    (root / "audio_jigsaw@4segments/media/000001-0.wav").unlink()  # missing
    clip = root / "temporal_jigsaw@4clips/media/000002-3.png"  # still a valid PNG, but not the exported one
    Image.open(clip).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(clip)
    with open(root / "pointcloud_jigsaw@3slabs/examples.jsonl", "a") as f:
        f.write('{"uid": "broken"\n')
    (root / "embodied_inverse_dynamics@default/examples.jsonl").unlink()
    with caplog.at_level(logging.WARNING):
        bench = PretextBench(str(root), batch_size=4)
        uids = [ex.uid for batch in bench.test_dataloader() for ex in batch]
    assert dict(bench.skipped) == {
        "jigsaw@3x3": 1,
        "audio_jigsaw@4segments": 1,
        "temporal_jigsaw@4clips": 1,
        "pointcloud_jigsaw@3slabs": 1,
        "embodied_inverse_dynamics@default": 3,
    }
    assert len(uids) == 3 * len(MIXED) - 6 and "jigsaw@3x3:0" not in uids and "jigsaw@3x3:1" in uids
    logged = caplog.text
    assert "000000-0.png" in logged and "000001-0.wav" in logged and "sha256" in logged and "line 4" in logged
    assert "holds 0 of the 3 lines" in logged


def test_a_manifest_naming_a_class_outside_tasks_is_refused(mixed, tmp_path):
    manifest = json.loads((mixed / "manifest.json").read_text())
    manifest["sets"]["jigsaw@3x3"]["task"]["class_path"] = "os.system"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not a tasks.Task class"):
        PretextBench(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="pretext-bench export"):
        PretextBench(str(tmp_path / "nowhere"))


def test_sets_a_policy_cannot_take_are_refused_before_testing_or_left_out_by_content(mixed):
    bench = PretextBench(str(mixed), tasks=["jigsaw", "audio_jigsaw"])
    bench.trainer = SimpleNamespace(lightning_module=SimpleNamespace(content_kinds=frozenset({"text", "image"})))
    with pytest.raises(ValueError, match="audio_jigsaw@4segments"):
        bench.setup("test")
    kept = PretextBench(str(mixed), tasks=["jigsaw", "audio_jigsaw"], content=["text", "image"])
    assert list(kept.tasks) == ["jigsaw@3x3"]
    with pytest.raises(ValueError, match="no set"):
        PretextBench(str(mixed), tasks=["audio_jigsaw"], content=["text", "image"])


def test_float_wav_round_trips_exactly():
    wave = np.random.default_rng(0).uniform(-1, 1, 999).astype(np.float32)
    back, rate = read_wav(wav_bytes(wave, 22050))
    assert rate == 22050 and np.array_equal(back, wave)
    soundfile = pytest.importorskip("soundfile")  # other readers take the files too
    import io

    data, rate = soundfile.read(io.BytesIO(wav_bytes(wave, 16000)), dtype="float32")
    assert rate == 16000 and np.array_equal(data, wave)


def test_zoo_test_on_an_export_logs_accuracy_per_task_and_level(mixed, tmp_path, monkeypatch):
    from tests.test_configs import parse
    from zoo.cli import cli

    config = str(Path(__file__).parents[1] / "configs" / "eval" / "pretext_bench.yaml")
    assert parse(config).config.data.class_path == "datamodules.pretext_bench.PretextBench"
    monkeypatch.chdir(tmp_path)
    cli(
        [
            "test",
            "--config",
            config,
            "--data.init_args.path",
            str(mixed),
            "--data.init_args.tasks",
            "[jigsaw, temporal_jigsaw, audio_jigsaw]",
            "--model.init_args.pretrained",
            "tiny:qwen2_5_vl",
            "--trainer.accelerator",
            "cpu",
            "--trainer.strategy.init_args.max_new_tokens",
            "2",
            "--trainer.enable_progress_bar",
            "false",
        ]
    )
    (run,) = (tmp_path / "runs" / "lightning_logs").iterdir()
    with open(run / "metrics.csv") as f:
        (logged,) = list(csv.DictReader(f))
    # the audio set is left out by the config's content filter: a vision-language policy cannot hear
    assert {"test/jigsaw@3x3/accuracy", "test/temporal_jigsaw@4clips/accuracy"} <= set(logged)
    assert not any("audio" in key for key in logged)
    rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert sorted({r["task"] for r in rows}) == ["jigsaw@3x3", "temporal_jigsaw@4clips"] and len(rows) == 6
    table = report(str(run / "predictions.jsonl"))
    for name in ("jigsaw@3x3", "temporal_jigsaw@4clips"):
        mine = [r["parts"]["accuracy"] for r in rows if r["task"] == name]
        assert float(logged[f"test/{name}/accuracy"]) == pytest.approx(sum(mine) / len(mine))
        assert f"| {name} | 3 | {sum(mine) / len(mine):.3f} | " in table


def test_levels_command_prints_every_level(capsys):
    from zoo.cli import main

    main(["pretext-bench", "levels"])
    out = capsys.readouterr().out
    assert "Jigsaw  jigsaw  2x2 (rows=2, cols=2); 3x3 (rows=3, cols=3)" in out
    assert len(out.splitlines()) == len(LEVELLED)


@pytest.mark.parametrize("spelling", ["absolute", "dot-dot", "symlink"])
def test_a_set_name_leading_out_of_the_folder_is_refused_at_load_in_one_line(tmp_path, spelling):
    """Before: an absolute set name read its examples from outside the folder; ``../`` and a
    symlinked set folder failed only example by example."""
    export_benchmark(out=str(tmp_path / "elsewhere"), tasks=["jigsaw@3x3"], n=2)
    outside, root = tmp_path / "elsewhere" / "jigsaw@3x3", tmp_path / "bench"
    root.mkdir()
    name = {"absolute": str(outside), "dot-dot": "../elsewhere/jigsaw@3x3", "symlink": "jigsaw@3x3"}[spelling]
    if spelling == "symlink":
        (root / name).symlink_to(outside, target_is_directory=True)
    manifest = json.loads((tmp_path / "elsewhere" / "manifest.json").read_text())
    manifest["sets"] = {name: manifest["sets"]["jigsaw@3x3"]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="leads out of the benchmark folder") as err:
        PretextBench(str(root)).records()
    assert "\n" not in str(err.value) and "manifest.json" in str(err.value)


def test_an_image_or_a_line_over_its_limit_skips_its_example_unread(tmp_path, caplog, monkeypatch):
    """Before: neither the pixels of an image nor the bytes of a line were bounded."""
    from tests.helpers import decoded_sizes

    export_benchmark(out=str(tmp_path), tasks=["rotation@4way"], n=2)  # 112 x 112 images
    decoded = decoded_sizes(monkeypatch)
    for limits, reason in [
        ({"max_image_pixels": 112 * 112 - 1}, "image too large"),
        ({"max_line_bytes": 200}, "line too long"),
    ]:
        caplog.clear()
        bench = PretextBench(str(tmp_path), **limits)
        with caplog.at_level(logging.WARNING), pytest.raises(ValueError, match="could be read"):
            bench.records()
        assert dict(bench.skipped) == {"rotation@4way": 2} and caplog.text.count(reason) == 2
    assert not decoded
    assert len(PretextBench(str(tmp_path), max_image_pixels=112 * 112).records()) == 2
