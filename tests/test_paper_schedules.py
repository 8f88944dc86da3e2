"""Every paper config's header states its schedule (``# Batch:``, ``# Updates:``, ``# LR:``,
``# Reward:``) and the settings do what it states; the papers' own schemes are pinned (PAPERS.md
and its corrections section)."""

import re
from pathlib import Path

import pytest

from tests.test_configs import PAPERS, parse

BATCH = re.compile(r"^# Batch: (\d+) prompts x (\d+) completions per (?:optimizer step|rollout), global", re.M)
UPDATES = re.compile(r"^# Updates: (\d+) per rollout", re.M)
LR = re.compile(r"^# LR: ([0-9.e-]+), (constant|linear decay to 0)", re.M)
REWARD = re.compile(r"^# Reward: \S", re.M)


def header(path: str) -> str:
    """The comment lines before the first setting."""
    lines = Path(path).read_text().splitlines()
    return "\n".join(line for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("#"))])


def schedule(path: str) -> dict:
    """Global prompts per rollout, G, updates per rollout, lr and LR schedule, as configured."""
    config = parse(path).config
    trainer, strategy = config.trainer, config.trainer.strategy.init_args
    accumulate = trainer.accumulate_grad_batches or 1
    model = config.model.init_args
    scheduler = model.scheduler
    return dict(
        prompts=trainer.devices * config.data.init_args.batch_size * accumulate,
        G=strategy.num_generations,
        updates=strategy.get("mini_batches", 1) * strategy.get("num_iterations", 1),
        lr=model.optimizer.init_args.lr,
        schedule="constant" if scheduler is None else scheduler.class_path.rsplit(".", 1)[-1],
        scheduler=scheduler,
        config=config,
    )


@pytest.mark.parametrize("path", PAPERS, ids=lambda p: Path(p).stem)
def test_the_header_states_the_schedule_the_config_trains(path):
    text, got = header(path), schedule(path)
    for pattern in (BATCH, UPDATES, LR, REWARD):
        assert pattern.search(text), f"{Path(path).name}: the header has no line matching {pattern.pattern!r}"
    prompts, G = map(int, BATCH.search(text).groups())
    assert (prompts, G) == (got["prompts"], got["G"])
    assert int(UPDATES.search(text).group(1)) == got["updates"]
    lr, kind = LR.search(text).groups()
    assert float(lr) == got["lr"]
    if kind == "constant":
        assert got["schedule"] == "constant"
    else:
        assert got["schedule"] == "LinearLR" and got["scheduler"].init_args.end_factor == 0.0


def _strategy(name: str):
    return schedule(next(p for p in PAPERS if p.endswith("/" + name)))


def test_trl_papers_decay_the_lr_linearly_to_zero_over_their_steps():
    for name, prompts, steps in (("ui_shift.yaml", 16, 1000), ("r1_aqa.yaml", 16, 1000), ("jigsaw_r1.yaml", 64, 2000)):
        got = _strategy(name)
        assert got["prompts"] == prompts and got["scheduler"].init_args.total_iters == steps, name
    ui_shift = _strategy("ui_shift.yaml")["config"]
    assert ui_shift.trainer.strategy.init_args.temperature == 1.0
    # 8 epochs of the 2,000 transitions at 16 prompts a step are the schedule's 1000 steps
    assert ui_shift.trainer.max_epochs * 2000 // 16 == 1000


def test_verl_and_easyr1_papers_train_their_update_schemes():
    for name in ("spatial_ssrl.yaml", "spatial_ssrl_depth.yaml"):
        got = _strategy(name)
        strategy = got["config"].trainer.strategy.init_args
        assert (got["prompts"], got["updates"]) == (256, 2), name  # 2 updates of 128 per 256-prompt rollout
        assert (strategy.epsilon, strategy.epsilon_high, strategy.clip_ratio_c) == (0.2, 0.3, 3.0), name
        assert got["config"].trainer.max_steps == 2 * 360, name  # 360 rollouts, 2 optimizer steps each
    for name in ("ssl4rl_rotation.yaml", "ssl4rl_jigsaw.yaml", "ssl4rl_position.yaml", "ssl4rl_contrastive.yaml"):
        got = _strategy(name)
        assert (got["prompts"], got["updates"]) == (512, 4), name
        assert got["config"].trainer.strategy.init_args.clip_ratio_c == 3.0, name
    for name in ("visual_jigsaw_image.yaml", "visual_jigsaw_video.yaml", "visual_jigsaw_3d.yaml", "videossr.yaml"):
        got = _strategy(name)
        assert got["updates"] == 1 and got["config"].trainer.strategy.init_args.clip_ratio_c == 3.0, name
    videossr = _strategy("videossr.yaml")
    # one epoch is the 30K set's 469 steps of 64 prompts (zoo drops partial batches)
    assert videossr["prompts"] == 64 and videossr["config"].data.init_args.epoch_size // 64 == 469
    assert videossr["config"].trainer.max_epochs == 1
