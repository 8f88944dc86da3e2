"""maj@k at evaluation: the majority answer among k samples (ballots on the task's canonical parsed
answer), scored by the verifier; hand-computed values, and ``zoo test``'s metrics with a canned
policy."""

import json

import pytest
import torch
from lightning.pytorch import Trainer

from callbacks import GRPOMetrics
from datamodules import PretextDataModule, SyntheticScenes
from tasks import Rotation
from tests.helpers import text_rollout
from zoo import GRPOStrategy, QwenVLPolicy
from zoo.evaluation import majority_at_k


def test_majority_at_k_by_hand():
    # example 0 (n = 5): ballots 90, 90, 180, 180, 180 -> maj@2 = 90 (right), maj@5 = 180 (wrong)
    # example 1: None, 0, None, 0, 270 -> maj@1 = no valid answer (0), maj@5 = 0 (accuracy 0.5)
    ballots = [90, 90, 180, 180, 180, None, 0, None, 0, 270]
    accuracy = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.5, 0.0])
    assert majority_at_k(ballots, accuracy, 5, 2).tolist() == [1.0, 0.5]
    assert majority_at_k(ballots, accuracy, 5, 5).tolist() == [0.0, 0.5]
    assert majority_at_k(ballots, accuracy, 5, 1).tolist() == [1.0, 0.0]


def test_a_tie_goes_to_the_answer_stated_first():
    ballots = [180, 90, 90, 180]
    accuracy = torch.tensor([0.0, 1.0, 1.0, 0.0])
    assert majority_at_k(ballots, accuracy, 4, 4).tolist() == [0.0]  # 2-2: 180 came first
    assert majority_at_k(ballots, accuracy, 4, 3).tolist() == [1.0]  # 90 wins 2-1


@pytest.mark.parametrize("k", [0, 5])
def test_maj_k_outside_one_to_n_is_refused(k):
    with pytest.raises(ValueError, match="1 <= k <= n"):
        majority_at_k([1, 1, 1, 1], torch.ones(4), 4, k)
    with pytest.raises(ValueError, match="eval_maj_k values"):
        GRPOStrategy(eval_num_generations=4, eval_temperature=1.0, eval_maj_k=[k])


#: What the canned policy writes for a rotation example whose truth is ``t``: spellings the task
#: reads as one angle split a vote on raw text; ``zz`` states no answer.
def canned_texts(truth: int) -> list[str]:
    wrong = (truth + 90) % 360
    return [f"{wrong}", f"{truth} degrees", f"{truth}°", f"{wrong}", "zz"]


def test_zoo_test_reports_maj_at_k_beside_pass_at_k(tmp_path, monkeypatch):
    policy = QwenVLPolicy("tiny:qwen2_5_vl")
    data = PretextDataModule(
        SyntheticScenes(size=20, image_size=64), [Rotation(answer_format="bare")], batch_size=4, val_size=4, test_size=4
    )

    def canned(examples, num_generations, **options):
        texts = [text for ex in examples for text in canned_texts(ex.answer)]
        return text_rollout(examples, num_generations, texts)

    monkeypatch.setattr(policy, "sample", canned)
    strategy = GRPOStrategy(
        max_new_tokens=2, eval_num_generations=5, eval_temperature=1.0, eval_pass_k=[1, 5], eval_maj_k=[1, 3, 5]
    )
    trainer = Trainer(
        strategy=strategy,
        logger=False,
        default_root_dir=tmp_path,
        callbacks=[GRPOMetrics(summary=False)],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.test(policy, data, verbose=False)
    logged = {name: value.item() for name, value in trainer.callback_metrics.items()}
    # per example: wrong, right, right, wrong, none. maj@1: the first (wrong) = 0; maj@3: right 2-1
    # (90 and 90° are one ballot; on raw text it would be a 3-way tie going to the wrong answer);
    # maj@5: 2-2 tie, the wrong answer was stated first = 0. accuracy 2/5, pass@5 = 1.
    expected = {"accuracy": 0.4, "pass@1": 0.4, "pass@5": 1.0, "maj@1": 0.0, "maj@3": 1.0, "maj@5": 0.0}
    assert {k: logged[f"test/{k}"] for k in expected} == pytest.approx(expected)
    assert logged["test/rotation/maj@3"] == pytest.approx(1.0)
    results = json.loads((tmp_path / "metrics.json").read_text())
    assert results["settings"]["eval_maj_k"] == [1, 3, 5]
