"""Multi-turn rollouts on 2 processes: rank 0's rows call the toy tool (`tool_script`), rank 1's
answer at once, so the ranks hold different numbers of turns; DDP and FSDP2 (whose scoring passes
must stay in step across ranks) make the same updates, and both train."""

import json

from tests.zoo.two_process import assert_same_update_that_trains, fit_weights, sgd_quickstart

ENGINE = {"class_path": "tests.zoo.tool_script.Scripted", "init_args": {"by_rank": True}}
TASK = "[{class_path: tests.zoo.tool_script.LookRotation, init_args: {labels: letters, answer_format: bare}}]"
ARGS = [
    *("--trainer.max_steps", "2"),
    *("--trainer.devices", "2"),
    *("--data.init_args.batch_size", "2"),
    *("--data.init_args.val_size", "0"),
    *("--data.init_args.tasks", TASK),
    *("--model.init_args.engine", json.dumps(ENGINE)),
    *("--validate_before_fit", "false"),
    *("--rollouts.every_n_steps", "0"),
    *("--trainer.strategy.init_args.max_new_tokens", "32"),
    *("--trainer.strategy.init_args.micro_batch_size", "4"),
    *("--trainer.strategy.init_args.entropy_coef", "0.1"),  # a gradient even when every reward is equal
    *("--trainer.strategy.init_args.max_grad_norm", "null"),
]


def test_ddp_and_fsdp2_train_a_tool_task_alike(tmp_path):
    config = sgd_quickstart(tmp_path)
    ddp, _ = fit_weights(config, tmp_path / "ddp", [*ARGS, "--trainer.strategy", "zoo.grpo.GRPODDPStrategy"])
    fsdp, _ = fit_weights(config, tmp_path / "fsdp", [*ARGS, "--trainer.strategy", "zoo.grpo.GRPOFSDPStrategy"])
    assert_same_update_that_trains(ddp, fsdp)
