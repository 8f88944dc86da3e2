"""Rollout and prediction logs can be capped: rows per step or evaluation, and bytes per file."""

import json
import warnings

import pytest

from callbacks.metrics import JsonlFile


def test_a_capped_log_stops_at_max_bytes_and_warns_once(tmp_path):
    log = JsonlFile(tmp_path / "rows.jsonl", max_bytes=100)
    rows = [{"n": i, "text": "x" * 16} for i in range(10)]  # 37 bytes a line
    with pytest.warns(UserWarning, match="reached max_bytes=100: later rows are not written"):
        assert log.append(rows) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        assert log.append(rows[:1]) == 0
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert [json.loads(line)["n"] for line in lines] == [0, 1] and (tmp_path / "rows.jsonl").stat().st_size <= 100


def test_an_uncapped_log_keeps_every_row(tmp_path):
    log = JsonlFile(tmp_path / "rows.jsonl")
    assert log.append([{"n": i} for i in range(1000)]) == 1000
    assert log.append([{"n": 1000}]) == 1 and len((tmp_path / "rows.jsonl").read_text().splitlines()) == 1001


def test_a_limit_below_one_byte_is_refused(tmp_path):
    with pytest.raises(ValueError, match="max_bytes must be >= 1 or None, got 0"):
        JsonlFile(tmp_path / "rows.jsonl", max_bytes=0)
