"""tasks.adapters: every task round-trips through dataset columns; TRL's GRPOTrainer trains on a zoo reward."""

import json
import random

import pytest

import tasks
from tasks import Rotation, Task
from tasks.adapters import example_columns, trl_reward, verl_compute_score, verl_fields
from tests.helpers import discover, make_item

TASKS = discover(tasks, Task)


def completions_for(task, example, other):
    """A perfect completion, another example's answer, and junk."""
    return [task.render_answer(example), task.render_answer(other), "", "<answer></answer>", "A"]


@pytest.mark.parametrize("cls", TASKS, ids=lambda c: c.__name__)
def test_columns_round_trip_for_every_task(cls):
    task = cls()
    example, other = (task.make_example(make_item(cls.modality, seed), random.Random(seed)) for seed in (0, 1))
    row = json.loads(json.dumps(example_columns(example)))  # what a dataset stores
    completions = completions_for(task, example, other)
    expected = [task.verify(example, c).total for c in completions]
    n = len(completions)
    got = trl_reward(task)(prompts=["p"] * n, completions=completions, **{k: [v] * n for k, v in row.items()})
    assert got == expected and got[0] == pytest.approx(task.max_reward)
    verl = json.loads(json.dumps(verl_fields(example)))
    score = verl_compute_score(task)
    scored = [score(verl["data_source"], c, verl["reward_model"]["ground_truth"], verl["extra_info"])
              for c in completions]
    assert [s["score"] for s in scored] == expected
    assert scored[0] == {"score": task.max_reward, **task.verify(example, completions[0]).parts}


def test_conversational_completions_and_rows_of_other_tasks():
    rotation = Rotation()
    example = rotation.make_example(make_item("image"), random.Random(0))
    row = example_columns(example)
    other = dict(row, zoo_task="jigsaw")
    reward = trl_reward(rotation)
    completion = [{"role": "assistant", "content": rotation.render_answer(example)}]
    parts = [{"role": "assistant", "content": [{"type": "text", "text": rotation.render_answer(example)}]}]
    got = reward(prompts=[[], [], []], completions=[completion, parts, completion],
                 **{k: [row[k], row[k], other[k]] for k in row})
    assert got == [1.0, 1.0, None] and reward.__name__ == "zoo_rotation"


def test_bad_columns_are_a_clear_error():
    with pytest.raises(ValueError, match="not the JSON"):
        trl_reward(Rotation())(prompts=["p"], completions=["A"], zoo_answer=["A"], zoo_meta=["{}"])


def test_trl_grpo_trainer_rewards_are_the_tasks_verify(tmp_path):
    """A few GRPOTrainer steps of a tiny text-only model on Rotation prompts (media shown as ``<image>``
    markers, numbered so each is unique): the rewards TRL logs equal ``task.verify`` on the completions it
    logs. One token, limited to the letters A-D, so some completions are right and some wrong."""
    import torch
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from zoo.tiny import build_tokenizer

    task = Rotation(labels="letters", answer_format="bare")
    examples = [task.make_example(make_item("image", i), random.Random(i)) for i in range(8)]
    prompts = {f"#{i} {ex.prompt_text}": ex for i, ex in enumerate(examples)}
    data = Dataset.from_list([{"prompt": p, **example_columns(ex)} for p, ex in prompts.items()])
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    allowed = set(tokenizer.convert_tokens_to_ids(list("ABCD")))
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=1, generation_kwargs={"suppress_tokens": sorted(
                          set(range(len(tokenizer))) - allowed)}, learning_rate=1e-3, logging_steps=1, report_to="none",
                      use_cpu=True, bf16=False, save_strategy="no", seed=0, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, reward_funcs=trl_reward(task), args=args, train_dataset=data,
                          processing_class=tokenizer)
    trainer.train()
    logged = trainer._logs
    completions, rewards = list(logged["completion"]), list(logged["rewards"]["zoo_rotation"])
    assert len(completions) == len(rewards) == 8 and trainer.state.global_step == 2
    expected = [task.verify(prompts[p], c).total for p, c in zip(logged["prompt"], completions, strict=True)]
    assert rewards == expected and 0 < sum(rewards) < len(rewards), (completions, rewards)
    assert any(h.get("rewards/zoo_rotation/mean") is not None for h in trainer.state.log_history)
