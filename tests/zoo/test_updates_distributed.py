"""Several updates per rollout (``mini_batches``) over FSDP2 make the updates DDP makes (whose
gradients `test_grpo_gradients` pins against the reference on 2 processes): 2 processes each, the
quickstart's tiny model, plain SGD so a wrong share or normaliser shows in the weights."""

from tests.zoo.two_process import assert_same_update_that_trains, fit_weights, sgd_quickstart

ARGS = [
    *("--trainer.max_steps", "4"),  # 2 rollouts, 2 optimizer steps each
    *("--trainer.devices", "2"),
    *("--data.init_args.batch_size", "2"),
    *("--data.init_args.val_size", "0"),
    *("--validate_before_fit", "false"),
    *("--rollouts.every_n_steps", "0"),
    *("--trainer.strategy.init_args.mini_batches", "2"),
    *("--trainer.strategy.init_args.loss_type", "dapo"),
    *("--trainer.strategy.init_args.entropy_coef", "0.1"),  # a gradient even when every reward is equal
    *("--trainer.strategy.init_args.max_grad_norm", "null"),
]


def run(config, cwd, strategy: str) -> dict:
    weights, name = fit_weights(config, cwd, [*ARGS, "--trainer.strategy", strategy])
    assert "step=4" in name
    return weights


def test_fsdp2_takes_the_mini_batch_steps_ddp_takes(tmp_path):
    config = sgd_quickstart(tmp_path)
    ddp = run(config, tmp_path / "ddp", "zoo.grpo.GRPODDPStrategy")
    fsdp = run(config, tmp_path / "fsdp", "zoo.grpo.GRPOFSDPStrategy")
    assert_same_update_that_trains(ddp, fsdp)
