"""`zoo.tools.prefix_speed` runs and reports both settings (numbers: docs/performance.md)."""

from zoo.tools.prefix_speed import PrefixSpeed


def test_a_small_run_reports_both_settings(capsys, tmp_path):
    out = tmp_path / "r.json"
    results = PrefixSpeed(image_sizes=[28], lengths=[2], prompts=2, generations=2, repeats=2, json=str(out))()
    (result,) = results
    assert len(result["whole_s"]) == len(result["once_s"]) == 2 and result["prompt_tokens"] > 2
    assert all(seconds > 0 for seconds in result["whole_s"] + result["once_s"])
    # 4 rows of 2 prompts: the prompts' activations are kept once instead of twice
    assert 0 < result["once_saved_mib"] < result["whole_saved_mib"]
    assert "| 28 | 2 |" in capsys.readouterr().out and out.exists()
