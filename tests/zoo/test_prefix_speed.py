"""`zoo.tools.prefix_speed` runs and reports both settings (the measurement itself: docs/performance.md)."""

from zoo.tools.prefix_speed import PrefixSpeed


def test_a_small_run_reports_both_settings(capsys, tmp_path):
    results = PrefixSpeed(image_sizes=[28], lengths=[2], prompts=2, generations=2, repeats=2, json=str(tmp_path / "r.json"))()
    (result,) = results
    assert len(result["whole"]) == len(result["once"]) == 2 and result["prompt_tokens"] > 2
    assert all(seconds > 0 for seconds, _ in result["whole"] + result["once"])
    assert "| 28 | 2 |" in capsys.readouterr().out and (tmp_path / "r.json").exists()
