"""torch's CPU threads on a shared machine (`zoo.threads`): one per core the load leaves free, at
most torch's default; ``ZOO_THREADS`` overrides."""

import pytest

from zoo import threads


@pytest.mark.parametrize(
    ("cores", "load", "expected"), [(2, 0.0, 2), (2, 0.6, 1), (2, 10.9, 1), (16, 4.2, 12), (16, 3.5, 12), (4, 0.4, 4)]
)
def test_free_cores_round_the_unloaded_share(cores, load, expected):
    assert threads.free_cores(cores, load) == expected


def test_load_and_cpu_set_choose_and_zoo_threads_overrides(monkeypatch):
    monkeypatch.delenv("ZOO_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (5.2, 1.0, 1.0))
    monkeypatch.setattr(threads.torch, "get_num_threads", lambda: 8)
    assert threads.choose_threads() == (3, "load 5.2 on 8 cores; ZOO_THREADS=<n> sets it")
    monkeypatch.setattr(threads.torch, "get_num_threads", lambda: 2)  # never above torch's default
    assert threads.choose_threads()[0] == 2
    monkeypatch.setenv("ZOO_THREADS", "5")
    assert threads.choose_threads() == (5, "ZOO_THREADS=5")
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("ZOO_THREADS", bad)
        with pytest.raises(ValueError, match="give a positive number of torch threads"):
            threads.choose_threads()
