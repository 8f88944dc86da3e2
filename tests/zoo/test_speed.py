"""`zoo speed` runs zoo and TRL side by side on the same settings and reports comparable numbers."""

import json

import pytest

from zoo.cli import main
from zoo.tools import speed, speed_setup


def test_summary_takes_medians_after_warmup_and_the_table_gives_the_ratio():
    zoo = {
        "steps": [
            {"s": 9.0, "tokens": 10, "sample_s": 5.0, "score_s": 0.1, "train_s": 3.0},
            {"s": 1.0, "tokens": 20, "sample_s": 0.5, "score_s": 0.1, "train_s": 0.4},
            {"s": 2.0, "tokens": 20, "sample_s": 1.5, "score_s": 0.1, "train_s": 0.4},
            {"s": 3.0, "tokens": 60, "sample_s": 2.5, "score_s": 0.1, "train_s": 0.4},
        ],
        "peak_gib": 1.0,
    }
    trl = {
        "steps": [
            {"s": 10.0, "tokens": 10},
            {"s": 4.0, "tokens": 40},
            {"s": 6.0, "tokens": 30},
            {"s": 8.0, "tokens": 40},
        ],
        "peak_gib": 2.0,
    }
    summaries = {"zoo": speed.summarise(zoo, warmup=1), "trl": speed.summarise(trl, warmup=1)}
    assert summaries["zoo"]["s_per_step"] == 2.0 and summaries["zoo"]["sample_s"] == 1.5
    assert summaries["zoo"]["completion_tokens_per_s"] == 20.0  # medians of 20, 10, 20 tokens/s
    assert summaries["trl"]["s_per_step"] == 6.0 and "sample_s" not in summaries["trl"]
    assert "zoo speed / TRL speed: 3.00x (steps per second)" in speed.table(summaries)


@pytest.mark.parametrize("framework", ["zoo", "trl"])
def test_each_framework_runs_the_same_small_setting(tmp_path, framework):
    out = tmp_path / "speed.json"
    main(
        [
            "speed",
            "--frameworks",
            f"[{framework}]",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--prompts",
            "2",
            "--generations",
            "2",
            "--max_new_tokens",
            "2",
            "--json",
            str(out),
        ]
    )
    (result,) = json.loads(out.read_text())["results"].values()
    assert result["steps_timed"] == 1
    assert result["s_per_step"] > 0 and 0 < result["completion_tokens_per_s"]
    assert result["peak_gib"] > 0


def test_rounds_pool_their_timed_steps_and_the_table_gives_cpu_ratios_per_zoo_loop():
    def run(*cpu):
        return {"steps": [{"s": 2 * c, "cpu_s": c, "tokens": 10} for c in cpu], "peak_gib": cpu[0]}

    pooled = speed.pooled([run(9.0, 1.0, 2.0), run(8.0, 3.0, 4.0)], warmup=1)
    assert [step["cpu_s"] for step in pooled["steps"]] == [1.0, 2.0, 3.0, 4.0] and pooled["peak_gib"] == 9.0
    summaries = {
        "zoo": speed.summarise(pooled, 0),  # CPU median 2.5
        "zoo:generate": speed.summarise(run(5.0), 0),
        "trl": speed.summarise(run(10.0), 0),
    }
    text = speed.table(summaries)
    assert "zoo speed / TRL speed: 4.00x (CPU seconds per step)" in text
    assert "zoo:generate speed / TRL speed: 2.00x (CPU seconds per step)" in text


def test_max_pixels_reloads_the_processor_with_that_bound():
    """The tiny processor stops at 224 x 224 (16 x 16 patches of 14 px): ``max_pixels`` lets a 448
    px image through whole (32 x 32), in both frameworks (they share `speed_setup.bounded`)."""
    from PIL import Image

    from zoo.qwen_vl import _qwen2_5_vl

    _, processor = _qwen2_5_vl()
    image = [Image.new("RGB", (448, 448))]

    def grid(settings: speed.Settings) -> list[int]:
        return speed_setup.bounded(processor, settings).image_processor(images=image)["image_grid_thw"].tolist()

    assert grid(speed.Settings()) == [[1, 16, 16]]
    assert grid(speed.Settings(max_pixels=448 * 448)) == [[1, 32, 32]]
