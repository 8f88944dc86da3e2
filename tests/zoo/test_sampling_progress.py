"""Progress inside a long step (`zoo.rollout.progress.SamplingProgress`): a ``[zoo]`` line with the
tokens sampled so far every 10 s of one ``generate``, nothing in a fast one, and the samples
unchanged."""

import logging
import random

import pytest
import torch

from tasks import Rotation
from tests.helpers import make_item
from zoo import QwenVLPolicy
from zoo.rollout import progress
from zoo.rollout.progress import SamplingProgress


class Clock:
    """Seconds that advance by ``step`` at every reading."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("[zoo] sampling")]


def test_reports_every_ten_seconds_and_changes_no_score(caplog):
    report = SamplingProgress(prompt_length=5, max_new_tokens=100, clock=Clock(4.0))  # start reads 4
    scores = torch.randn(3, 7)
    with caplog.at_level(logging.INFO):
        for sampled in range(1, 7):  # readings at 8, 12, 16, 20, 24, 28 s
            assert report(torch.zeros(3, 5 + sampled, dtype=torch.long), scores) is scores
    # reports once 10 s passed since the start (at 16 s) and again 12 s later (at 28 s)
    assert lines(caplog) == [
        "[zoo] sampling: 3 of at most 100 tokens in each of 3 completions, 12 s into this rollout",
        "[zoo] sampling: 6 of at most 100 tokens in each of 3 completions, 24 s into this rollout",
    ]


@pytest.mark.parametrize("slow", [False, True])
def test_generate_reports_only_when_slow(monkeypatch, caplog, slow):
    policy = QwenVLPolicy("tiny:qwen2_5_vl")
    policy.configure_model()
    example = Rotation(answer_format="bare").make_example(make_item("image", 0), random.Random(0))
    monkeypatch.setattr(progress.time, "monotonic", Clock(11.0 if slow else 0.001))
    with caplog.at_level(logging.INFO):
        policy.sample([example], 2, max_new_tokens=4, seed=0)
    shown = lines(caplog)
    assert bool(shown) == slow  # 11 s between tokens: a line per token; a fast generate: none
    assert all("in each of 2 completions" in line for line in shown)


def test_every_is_due_once_its_seconds_have_passed():
    timer = progress.Every(10.0, clock=Clock(4.0))  # starts at 4
    assert [timer.due() for _ in range(6)] == [False, False, True, False, False, True]  # 16 s, 28 s
    assert timer.elapsed == 24.0


@pytest.mark.parametrize("slow", [False, True])
def test_training_passes_report_only_when_slow(monkeypatch, caplog, slow):
    from datamodules import PretextDataModule, SyntheticScenes
    from tests.helpers import grpo_fit
    from zoo import training

    monkeypatch.setattr(training, "PROGRESS_EVERY", 0.0 if slow else 1e9)  # due at every pass, or never
    data = PretextDataModule(SyntheticScenes(), Rotation(answer_format="bare"), batch_size=2, val_size=2)
    with caplog.at_level(logging.INFO):
        grpo_fit(QwenVLPolicy("tiny:qwen2_5_vl"), data, steps=1, micro_batch_size=1)  # 2 x 2 rows: 4 passes
    reports = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[zoo] training:")]
    expected = [f"[zoo] training: {k} forward and backward passes done" for k in range(1, 5)] if slow else []
    assert [line.split(",")[0] for line in reports] == expected
