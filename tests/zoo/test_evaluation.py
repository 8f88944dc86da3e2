"""Held-out evaluation: the pass@k estimator, per-task means, evaluation settings, and
`Trainer.test` with a canned policy (hand-computed metrics) and with a real tiny policy (sampled
evaluation is reproducible)."""

import json

import pytest
import torch
from lightning.pytorch import Trainer, seed_everything

from callbacks import GRPOMetrics, Predictions
from datamodules import PretextDataModule, SyntheticScenes
from tasks import PatchPosition, Reward, Rotation
from tests.helpers import text_rollout
from zoo import GRPOStrategy, QwenVLPolicy
from zoo.evaluation import TaskMeans, example_scores, pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # pass@1 = c / n
        (5, 2, 2, 0.7),  # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
        (4, 1, 3, 0.75),  # 1 - C(3, 3) / C(4, 3) = 1 - 1/4
        (10, 3, 5, 1 - 21 / 252),  # C(7, 5) = 21, C(10, 5) = 252
        (4, 0, 1, 0.0),
        (4, 0, 4, 0.0),  # no correct sample: never passes
        (4, 4, 1, 1.0),
        (4, 4, 3, 1.0),  # every sample correct
        (4, 1, 4, 1.0),
        (4, 2, 3, 1.0),  # k > n - c: every draw of k holds a correct one
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
    ],
)
def test_pass_at_k_matches_hand_computed_values(n, c, k, expected):
    assert pass_at_k(torch.tensor([c]), n, k).item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "k"), [(4, 0), (4, 5), (1, 2)])
def test_pass_at_k_refuses_k_outside_one_to_n(n, k):
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(torch.tensor([0]), n, k)


def test_partial_credit_counts_for_accuracy_but_not_for_pass_at_k():
    rewards = [
        Reward(1.1, {"accuracy": 1.0, "format": 1.0}),
        Reward(0.6, {"accuracy": 0.5, "format": 1.0}),
        Reward(0.6, {"accuracy": 0.5, "format": 1.0}),
        Reward(0.0, {"format": 0.0}),
    ]
    scores = example_scores(rewards, num_generations=2, ks=[1, 2])
    torch.testing.assert_close(scores["accuracy"], torch.tensor([0.75, 0.25], dtype=torch.float64))
    torch.testing.assert_close(scores["reward"], torch.tensor([0.85, 0.3], dtype=torch.float64))
    torch.testing.assert_close(scores["pass@1"], torch.tensor([0.5, 0.0], dtype=torch.float64))
    torch.testing.assert_close(scores["pass@2"], torch.tensor([1.0, 0.0], dtype=torch.float64))


def test_task_means_average_overall_and_per_task():
    means = TaskMeans(["a", "b"], ["accuracy"])
    means.update(["a", "b", "a"], {"accuracy": torch.tensor([1.0, 0.5, 0.0])})
    means.update(["other"], {"accuracy": torch.tensor([0.5])})  # an unlisted task counts only overall
    assert means.compute() == {
        "accuracy": 0.5,
        "examples": 4.0,
        "a/accuracy": 0.5,
        "a/examples": 2.0,
        "b/accuracy": 0.5,
        "b/examples": 1.0,
    }
    with pytest.warns(UserWarning, match="before the ``update``"):  # e.g. a rank without held-out batches
        assert TaskMeans(["a"], ["accuracy"]).compute() == {}  # nothing evaluated: nothing to report


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (dict(eval_num_generations=0), "eval_num_generations must be >= 1"),
        (dict(eval_temperature=-0.5), "eval_temperature must be >= 0"),
        (dict(eval_num_generations=4), "greedy decoding gives n identical"),
        (dict(eval_num_generations=4, eval_temperature=1.0, eval_pass_k=[1, 8]), r"eval_pass_k values must be in \[1"),
        (dict(eval_pass_k=[0]), "eval_pass_k values"),
        (dict(eval_top_p=0.0), "eval_top_p"),
    ],
)
def test_bad_evaluation_settings_fail_at_construction(bad, message):
    with pytest.raises(ValueError, match=message):
        GRPOStrategy(**bad)


def test_default_pass_k_is_one_and_n():
    assert GRPOStrategy().evaluation.pass_k == [1]
    assert GRPOStrategy(eval_num_generations=8, eval_temperature=0.7).evaluation.pass_k == [1, 8]


def evaluate(policy, data, tmp_path, **settings):
    trainer = Trainer(
        strategy=GRPOStrategy(max_new_tokens=2, **settings),
        logger=False,
        default_root_dir=tmp_path,
        callbacks=[GRPOMetrics(summary=False), Predictions()],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.test(policy, data, verbose=False)
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    return trainer, rows


#: Correct samples out of n=4 that the canned policy writes for each task (the first c samples).
CORRECT = {"rotation": 1, "patch_position": 3}


def test_canned_policy_logs_hand_computed_accuracy_reward_and_pass_at_k(tmp_path, monkeypatch):
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl")
    data = PretextDataModule(
        SyntheticScenes(size=40, image_size=112),
        [
            Rotation(labels="letters", answer_format="bare", format_weight=0.5),
            PatchPosition(answer_format="bare", format_weight=0.5),
        ],
        batch_size=4,
        val_size=8,
        test_size=8,
    )
    calls = []

    def canned(examples, num_generations, **options):
        calls.append(options)
        tasks = data.tasks
        texts = [
            tasks[ex.task].render_answer(ex) if g < CORRECT[ex.task] else "zz"
            for ex in examples
            for g in range(num_generations)
        ]
        return text_rollout(examples, num_generations, texts)

    monkeypatch.setattr(policy, "sample", canned)
    trainer, rows = evaluate(
        policy, data, tmp_path, eval_num_generations=4, eval_temperature=0.8, eval_seed=7, eval_pass_k=[1, 2, 4]
    )
    assert calls and all(c["seed"] == 7 and c["temperature"] == 0.8 for c in calls)
    logged = {name: value.item() for name, value in trainer.callback_metrics.items()}
    # the tasks take turns over the 8 held-out items: 4 examples each. Correct answers earn 1 + 0.5
    # format, "zz" earns nothing (malformed). rotation, c=1 of 4: accuracy 1/4, reward 1.5/4, pass@2
    # = 1 - C(3,2)/C(4,2) = 1/2, pass@4 = 1 patch_position, c=3 of 4: accuracy 3/4, reward 4.5/4,
    # pass@2 = 1 - C(1,2)/C(4,2) = 1, pass@4 = 1
    expected = {
        "rotation/accuracy": 0.25,
        "rotation/reward": 0.375,
        "rotation/pass@1": 0.25,
        "rotation/pass@2": 0.5,
        "rotation/pass@4": 1.0,
        "patch_position/accuracy": 0.75,
        "patch_position/reward": 1.125,
        "patch_position/pass@1": 0.75,
        "patch_position/pass@2": 1.0,
        "patch_position/pass@4": 1.0,
        "accuracy": 0.5,
        "reward": 0.75,
        "pass@1": 0.5,
        "pass@2": 0.75,
        "pass@4": 1.0,
    }
    assert logged == pytest.approx({f"test/{k}": v for k, v in expected.items()})
    results = json.loads((tmp_path / "metrics.json").read_text())
    assert results["split"] == "test" and results["settings"]["eval_pass_k"] == [1, 2, 4]
    assert results["metrics"]["test/examples"] == 8 and results["metrics"]["test/rotation/examples"] == 4
    assert {k: v for k, v in results["metrics"].items() if not k.endswith("examples")} == pytest.approx(logged)
    # 4 rows per example, samples 0-3 in order, the first c correct
    assert len(rows) == 32 and [r["sample"] for r in rows] == [0, 1, 2, 3] * 8
    assert all(r["parts"]["accuracy"] == float(r["sample"] < CORRECT[r["task"]]) for r in rows)


def test_sampled_evaluation_is_reproducible_and_independent_of_the_run_seed(tmp_path):
    completions, weights = [], []
    for run, seed in enumerate((0, 123)):
        seed_everything(seed)  # torch's generator differs between the runs; the evaluation seed does not
        policy = QwenVLPolicy("tiny:qwen2_5_vl")
        policy.configure_model()
        weights.append(torch.cat([p.detach().flatten() for p in policy.parameters()]))
        data = PretextDataModule(
            SyntheticScenes(size=40),
            Rotation(labels="letters", answer_format="bare"),
            batch_size=2,
            val_size=4,
            test_size=4,
        )
        _, rows = evaluate(policy, data, tmp_path / str(run), eval_num_generations=3, eval_temperature=1.0)
        completions.append([(r["uid"], r["sample"], r["completion"]) for r in rows])
    assert torch.equal(weights[0], weights[1])  # the same checkpoint
    assert completions[0] == completions[1]
    by_example = {}
    for uid, _, text in completions[0]:
        by_example.setdefault(uid, set()).add(text)
    assert len(completions[0]) == 12 and any(len(texts) > 1 for texts in by_example.values())  # really sampled
