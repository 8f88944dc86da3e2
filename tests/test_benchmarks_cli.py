"""`zoo test` on benchmark fixtures: the logged accuracy and reward and every predictions.jsonl row
equal hand-computed values (a policy with canned replies), and a real tiny model runs the same path
end to end."""

import csv
import json

import pytest
import torch

from tests import benchmark_fixtures as fx
from tests.test_cli import ROOT, run_dir, zoo
from zoo.cli import cli
from zoo.qwen_vl import QwenVLPolicy
from zoo.rollout.rollout import Rollout


class CannedPolicy(QwenVLPolicy):
    """A tiny Qwen-VL whose reply to held-out example ``i`` is ``replies[i]`` (prompts are still
    encoded).

    Args:
        replies: The completion for each held-out example, by index.
        **kwargs: See `zoo.QwenVLPolicy`.
    """

    def __init__(self, replies: list[str], **kwargs):
        super().__init__(**kwargs)
        self.replies = replies

    @torch.no_grad()
    def sample(self, examples, num_generations=1, **kwargs) -> Rollout:
        texts = [self.replies[int(ex.uid.rsplit(":", 1)[1])] for ex in examples for _ in range(num_generations)]
        n = len(texts)
        return Rollout(
            examples=list(examples),
            prompts=self.encode(examples),
            num_generations=num_generations,
            completion_ids=torch.full((n, 1), self.eos_ids[0]),
            completion_mask=torch.ones(n, 1, dtype=bool),
            truncated=torch.zeros(n, dtype=bool),
            completions=texts,
        )


def zoo_test(tmp_path, monkeypatch, config: str, path, replies: list[str]) -> tuple[dict, list[dict]]:
    """Run ``zoo test`` in-process with the canned policy; the logged test metrics and the
    predictions rows."""
    monkeypatch.chdir(tmp_path)
    cli(
        [
            "test",
            "--config",
            str(ROOT / config),
            "--data.init_args.source.init_args.path",
            str(path),
            "--model",
            f"{__name__}.CannedPolicy",
            "--model.init_args.pretrained",
            "tiny:qwen2_5_vl",
            "--model.init_args.dtype",
            "float32",
            "--model.init_args.replies",
            json.dumps(replies),
            "--trainer.accelerator",
            "cpu",
            "--trainer.enable_progress_bar",
            "false",
        ]
    )
    with open(run_dir(tmp_path) / "metrics.csv") as f:
        (logged,) = [{k: float(v) for k, v in r.items() if v} for r in csv.DictReader(f)]
    rows = [json.loads(line) for line in (run_dir(tmp_path) / "predictions.jsonl").read_text().splitlines()]
    return logged, rows


def test_cv_bench_accuracy_is_three_of_five(tmp_path, monkeypatch):
    path = fx.cv_bench(tmp_path)  # answers A, B, A, C, B and three bad rows, skipped when read
    replies = ["A", "A", "(A)", "C.", "the second"]  # right, wrong, right, right, not an option
    logged, rows = zoo_test(tmp_path, monkeypatch, "configs/eval/cv_bench.yaml", path, replies)
    assert logged["test/accuracy"] == pytest.approx(0.6) and logged["test/mcq/accuracy"] == pytest.approx(0.6)
    assert logged["test/reward"] == pytest.approx(0.6)
    assert [r["completion"] for r in rows] == replies and [r["expected"] for r in rows] == list("ABACB")
    assert [r["parts"] for r in rows] == [
        {"accuracy": a, "format": f} for a, f in [(1, 1), (0, 1), (1, 1), (1, 1), (0, 0)]
    ]
    assert [r["answer"] for r in rows] == ["left", "two", "left", "three", "right"]
    assert all(r["split"] == "test" for r in rows) and "Question 3?" in rows[3]["prompt"]


def test_refcoco_reward_is_the_iou_and_accuracy_counts_iou_from_half(tmp_path, monkeypatch):
    path = fx.refcoco(tmp_path)
    # 100 x 80 images are shown at 112 x 84 (multiples of 28): [0, 0, 50, 80] -> [0, 0, 56, 84]
    # twice (two sentences), [50, 0, 100, 40] -> [56, 0, 112, 42]
    replies = [
        "[0, 0, 56, 84]",  # IoU 1
        "[28, 0, 84, 84]",  # overlap 28 x 84 over a union of 84 x 84: IoU 1/3
        '{"bbox_2d": [56, 0, 112, 21], "label": "top right"}',
    ]  # the top half of the box: IoU 1/2
    logged, rows = zoo_test(tmp_path, monkeypatch, "configs/eval/refcoco.yaml", path, replies)
    assert [r["parts"]["iou"] for r in rows] == pytest.approx([1.0, 1 / 3, 0.5])
    assert [r["parts"]["accuracy"] for r in rows] == [1.0, 0.0, 1.0]
    assert [r["answer"] for r in rows] == [[0, 0, 56, 84], [0, 0, 56, 84], [56, 0, 112, 42]]
    assert logged["test/accuracy"] == pytest.approx(2 / 3)
    assert logged["test/reward"] == pytest.approx((1 + 1 / 3 + 0.5) / 3)


def test_a_tiny_model_runs_zoo_test_on_mmau_end_to_end(tmp_path):
    pytest.importorskip("soundfile")
    path = fx.mmau(tmp_path)
    zoo(
        "test",
        "--config",
        str(ROOT / "configs/eval/mmau_test_mini.yaml"),
        "--data.init_args.source.init_args.path",
        str(path),
        "--model.init_args.pretrained",
        "tiny:qwen2_audio",
        "--model.init_args.dtype",
        "float32",
        "--trainer.accelerator",
        "cpu",
        "--trainer.strategy.init_args.max_new_tokens",
        "4",
        cwd=tmp_path,
    )
    rows = [json.loads(line) for line in (run_dir(tmp_path) / "predictions.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in rows] == ["low", "middle", "high"] and {r["task"] for r in rows} == {"mcq"}
    for row in rows:  # a random model's reply is scored like any other: strict option text in <answer>
        assert row["parts"]["accuracy"] == float(row["parsed"] == row["answer"])
    with open(run_dir(tmp_path) / "metrics.csv") as f:
        (logged,) = [r for r in csv.DictReader(f) if r.get("test/accuracy")]
    assert float(logged["test/accuracy"]) == pytest.approx(sum(r["parts"]["accuracy"] for r in rows) / 3)
