"""`zoo test` of a task with tools: the evaluation samples multi-turn rollouts (a scripted engine
writes the calls and answers), scores the transcripts, and its pass@k and maj@k read each row's
answer from its last turn (`tasks.Task.canonical_answer` through the task's `extract_answer`)."""

import json

import pytest
from lightning.pytorch import Trainer

from callbacks import GRPOMetrics, Predictions
from datamodules import PretextDataModule, SyntheticScenes
from tasks import Rotation
from tasks.tools.base import TURN_BREAK, turns_of
from tests.zoo.test_turns import BOX
from zoo import GRPOStrategy, QwenVLPolicy
from zoo.data import verify
from zoo.rollout.engine import Prompts, RolloutEngine, Sampling
from zoo.rollout.turns import MultiTurnRollout


class LookRotation(Rotation):
    """Rotation with the `Look` tool whose answer is its transcript's last turn (as
    `tasks.ToolUseTask` reads it)."""

    toolbox = BOX

    def extract_answer(self, completion: str) -> str | None:
        return super().extract_answer(turns_of(completion)[-1])


def script(truth: int) -> dict[int, list[str]]:
    """What sample g writes for an example whose true angle is ``truth``, turn by turn: a wrong
    answer at once; a call, then the right angle; a call, then the right angle spelt otherwise (one
    ballot with the previous one); an invalid call."""
    wrong = (truth + 90) % 360
    return {
        0: [f"{wrong}"],
        1: ["<look>1</look>", f"{truth}"],
        2: ["<look>2</look>", f"{truth} degrees"],
        3: ["<look>x</look>"],
    }


class Scripted(RolloutEngine):
    def sync_weights(self, policy) -> None:
        return None

    def offload(self) -> None:
        return None

    def generate(self, prompts: Prompts, n: int, sampling: Sampling) -> list[list[int]]:
        out = []
        for ex in prompts.examples:
            for g in range(n):
                if "/turn" in ex.uid:  # a later turn: one sample of the row's conversation
                    _, sample, turn = ex.uid.rsplit("/", 2)
                    text = script(ex.answer)[int(sample)][int(turn.removeprefix("turn"))]
                else:
                    text = script(ex.answer)[g][0]
                ids = self.policy.tokenizer(text, add_special_tokens=False)["input_ids"]
                out.append((ids + [sampling.eos_ids[0]])[: sampling.max_new_tokens])
        return out


def test_zoo_test_of_a_tool_task_scores_transcripts_with_pass_and_maj_at_k(tmp_path, monkeypatch):
    policy = QwenVLPolicy("tiny:qwen2_5_vl", engine=Scripted())
    data = PretextDataModule(
        SyntheticScenes(size=20, image_size=56),
        [LookRotation(answer_format="bare")],
        batch_size=2,
        val_size=4,
        test_size=4,
    )
    seen = []
    monkeypatch.setattr("zoo.evaluation.verify", lambda dm, rollout: seen.append(rollout) or verify(dm, rollout))
    strategy = GRPOStrategy(
        max_new_tokens=32, eval_num_generations=4, eval_temperature=1.0, eval_pass_k=[1, 4], eval_maj_k=[1, 3]
    )
    trainer = Trainer(
        strategy=strategy,
        logger=False,
        default_root_dir=tmp_path,
        callbacks=[GRPOMetrics(summary=False), Predictions()],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.test(policy, data, verbose=False)
    assert seen and all(isinstance(r, MultiTurnRollout) for r in seen)
    assert seen[0].calls.tolist() == [0, 1, 1, 0] * 2 and seen[0].invalid.tolist() == [False, False, False, True] * 2
    logged = {name.removeprefix("test/"): value.item() for name, value in trainer.callback_metrics.items()}
    # per example: wrong; right after a call; right (another spelling) after a call; invalid.
    # maj@1: the wrong answer; maj@3: the right one 2-1, only if the ballots read the last turns
    expected = {"accuracy": 0.5, "pass@1": 0.5, "pass@4": 1.0, "maj@1": 0.0, "maj@3": 1.0}
    assert {k: logged[k] for k in expected} == pytest.approx(expected)
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and rows[1]["completion"] == f"<look>1</look>{TURN_BREAK}{rows[1]['answer']}"
    assert [r["parts"]["accuracy"] for r in rows[:4]] == [0.0, 1.0, 1.0, 0.0]
