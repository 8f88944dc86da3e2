"""zoo's model cache (`zoo.cache`): built once, published atomically, nothing left by a failed
build; a trained tiny base is only loaded, never trained by loading."""

import pytest

from zoo import tiny
from zoo.cache import build_once


def write_model(folder):
    (folder / "config.json").write_text("{}")


def test_an_entry_is_built_once_and_published_whole(tmp_path):
    calls = []
    target = tmp_path / "cache" / "model-abc"
    assert build_once(target, lambda folder: calls.append(write_model(folder))) == target
    assert build_once(target, lambda folder: calls.append(write_model(folder))) == target
    assert len(calls) == 1 and (target / "config.json").is_file()
    assert [p.name for p in target.parent.iterdir()] == ["model-abc"]  # no temporary folder left


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    target = tmp_path / "cache" / "model-abc"

    def fail(folder):
        (folder / "half.bin").write_bytes(b"x")
        raise RuntimeError("the build broke")

    with pytest.raises(RuntimeError, match="the build broke"):
        build_once(target, fail)
    assert list(target.parent.iterdir()) == []


def test_a_build_that_lost_the_race_keeps_the_winner(tmp_path):
    target = tmp_path / "model"

    def race(folder):  # another process publishes while this one builds
        target.mkdir()
        (target / "config.json").write_text('{"winner": true}')
        write_model(folder)

    build_once(target, race)
    assert (target / "config.json").read_text() == '{"winner": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_loading_the_trained_base_never_trains_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"tiny:qwen2_5_vl_perception is trained.*`zoo build-base`"):
        tiny.resolve("tiny:qwen2_5_vl_perception")
    assert not (tmp_path / "tiny").exists() or not any((tmp_path / "tiny").iterdir())
    recipe = tiny.TRAINED["qwen2_5_vl_perception"]
    built = tiny.trained_dir("qwen2_5_vl_perception", recipe.steps, recipe.batch, recipe.lr)
    built.mkdir(parents=True)
    write_model(built)
    assert tiny.resolve("tiny:qwen2_5_vl_perception") == str(built)
