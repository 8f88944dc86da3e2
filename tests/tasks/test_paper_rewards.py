"""Each paper config rewards completions as that paper's own reward code does.

A table per paper: completions and the total the paper's reward function returns for them, worked
out by reading its code (the file and commit are named above each table; where the repository is
not in the reference index, the formula of /work/shared/reference/PAPERS.md). The zoo task is built
from the paper config's own task arguments, so the table also checks that the config selects its
paper's semantics (`tasks.reading`). Cases where zoo deliberately reads more or less than the paper
(docs/tasks.md, "Paper-exact reward semantics") are left out of the tables and named in comments.
"""

import random
from pathlib import Path

import pytest
import yaml

import tasks
from tasks import Example
from tests.helpers import make_item

CONFIGS = Path(__file__).parents[2] / "configs" / "papers"
THINK = "<think>x</think>"


def config_task(config: str, name: str) -> tasks.Task:
    """The task ``tasks.<name>`` as ``configs/papers/<config>.yaml`` builds it."""
    data = yaml.safe_load((CONFIGS / f"{config}.yaml").read_text())["data"]["init_args"]
    (spec,) = [spec for spec in data["tasks"] if spec["class_path"] == f"tasks.{name}"]
    return getattr(tasks, name)(**spec.get("init_args", {}))


def example_of(task: tasks.Task, modality: str, seed: int = 0) -> Example:
    return task.make_example(make_item(modality, seed), random.Random(seed))


def swapped(labels: list[str], sep: str) -> str:
    """An order with its first two labels swapped."""
    return sep.join([labels[1], labels[0], *labels[2:]])


def check(task: tasks.Task, example: Example, table: list[tuple[str, float]], scale: float = 1.0) -> None:
    got = [scale * task.verify(example, completion).total for completion, _ in table]
    # abs=1e-6: Spatial-SSRL's 1/9 is written 0.1111111 in its configs
    assert got == pytest.approx([expected for _, expected in table], abs=1e-6), [c for c, _ in table]


# penghao-wu/visual_jigsaw verl/utils/reward_score/visual_jigsaw.py::compute_score (commit 78f8421):
# a completion that does not fullmatch <think>.*</think>.*\boxed{.*}.* scores 0; otherwise 0.2 for
# the format, +1 for the exact order (the last box: mathruler's extract_boxed_content), else 0.2 x
# the fraction in place when K > 4 and the answer holds K distinct numbers; -0.5 for a long line
# repeated more than 3 times. Left out: a box of K distinct numbers that is no permutation of 1..K
# (partial credit there, none here), answers spaced without commas ("2 3 1 ..." parses here, not
# there), and a repeating completion that fails the format (0 there, -0.5 here).
@pytest.mark.parametrize(
    "config, name",
    [("visual_jigsaw_image", "Jigsaw"), ("visual_jigsaw_video", "TemporalJigsaw"), ("visual_jigsaw_3d", "DepthOrder")],
)
def test_visual_jigsaw(config, name):
    task = config_task(config, name)
    if name == "Jigsaw":
        example = example_of(task, "image")
    else:  # 6 clips or points: their scores read only the order
        example = Example([], [2, 3, 1, 5, 4, 6], task.name, {})
    truth = [str(label) for label in example.answer]
    k = len(truth)
    right, wrong = ",".join(truth), swapped(truth, ",")
    repeated = "a line of seven words or even more\n" * 4
    check(
        task,
        example,
        [
            (f"{THINK}\\boxed{{{right}}}", 1.2),
            (f"{THINK}\\boxed{{{wrong}}}", 0.2 + 0.2 * (k - 2) / k),
            (f"{THINK}\\boxed{{{','.join('1' * k)}}}", 0.2),  # the case: 0 under zoo's default
            (f"{THINK}\\boxed{{nine tiles}}", 0.2),
            (f"{THINK}The order is \\boxed{{{wrong}}}, no: \\boxed{{{right}}}.", 1.2),
            (f"<think>\n{repeated}</think>\\boxed{{{right}}}", 0.7),
            (f"{THINK}<answer>{right}</answer>", 0.0),
            (f"\\boxed{{{right}}}", 0.0),
            (f"<think>x\\boxed{{{right}}}", 0.0),
        ],
    )


# InternLM/Spatial-SSRL training/GRPO/examples/reward_function/math.py::img_score (commit 95909c6):
# blanks around <, > and / are collapsed; format = fullmatch <think>.*</think>.*\boxed{.*}.*;
# accuracy = the last box's content equals the answer string; overall = 0.9 accuracy + 0.1 format.
# zoo's total is accuracy + format_weight x format with format_weight 1/9: the same reward / 0.9.
# Left out: spellings zoo parses but the paper compares as strings ("2 - 0 - 3 - 1", "2,0,3,1"),
# and blanks inside tags ("< think >", collapsed there).
@pytest.mark.parametrize("config", ["spatial_ssrl"])
def test_spatial_ssrl(config):
    task = config_task(config, "PatchReorder")
    example = example_of(task, "image")
    right = task.answer_text(example)
    wrong = swapped(right.split("-"), "-")
    check(
        task,
        example,
        [
            (f"{THINK}\\boxed{{{right}}}", 1.0),
            (f"{THINK}\\boxed{{{wrong}}}", 0.1),
            (f"{THINK}\\boxed{{the patches}}", 0.1),  # the pattern alone pays
            (f"{THINK}\\boxed{{}}", 0.1),
            (f"\\boxed{{{right}}}", 0.9),  # accuracy needs no think block, the format does
            (f"{THINK}first \\boxed{{{wrong}}}, then \\boxed{{{right}}}", 1.0),
            (f"{THINK}<answer>{right}</answer>", 0.0),
        ],
        scale=0.9,
    )


# PKU-ML/SSL4RL verl/utils/reward_score/ssl4rl.py and jigsaw.py are not in the reference index:
# PAPERS.md section 4.2 and correction 6. The first <answer>(.*?)</answer> anywhere is the answer
# (no <think> block needed, none missing is 0); ssl4rl: 1 when it equals the answer; jigsaw: the
# fraction of positions in place; no format reward. Left out: a jigsaw answer that is no permutation
# (the fraction there, 0 here).
def test_ssl4rl_rotation():
    task = config_task("ssl4rl_rotation", "Rotation")
    example = example_of(task, "image")
    right = task.answer_text(example)
    wrong = str((int(right) + 90) % 360)
    check(
        task,
        example,
        [
            (f"{THINK}<answer>{right}</answer>", 1.0),
            (f"<answer>{right}</answer>", 1.0),
            (f"It turned {wrong}? No. <answer>{right}</answer> I am sure.", 1.0),
            (f"{THINK}<answer>{wrong}</answer>", 0.0),
            (right, 0.0),
        ],
    )


def test_ssl4rl_jigsaw():
    task = config_task("ssl4rl_jigsaw", "Jigsaw")
    example = example_of(task, "image")
    truth = [str(label) for label in example.answer]
    check(
        task,
        example,
        [
            (f"{THINK}<answer>{','.join(truth)}</answer>", 1.0),
            (f"<answer>{swapped(truth, ',')}</answer>", 0.5),
            (f"The order: <answer>{','.join(truth[::-1])}</answer>", 0.0),
            (",".join(truth), 0.0),
        ],
    )


# xiaomi-research/r1-aqa src/utils/rewards.py (commit 9e582a2): accuracy_reward compares the first
# <answer>(.*?)</answer> found anywhere with the option text exactly; format_reward is 1 when the
# whole completion fullmatches <answer>.*?</answer>; weight 1 each. Left out: math_verify's numeric
# matches, the whole completion taken as the answer when it holds no tag ("Guitar" earns 1 there),
# and answers spanning lines (its search does not cross a newline).
def test_r1_aqa():
    task = config_task("r1_aqa", "AudioMCQ")
    example = Example([], "Guitar", task.name, {"choices": ["Guitar", "Piano", "Violin"]})
    check(
        task,
        example,
        [
            ("<answer>Guitar</answer>", 2.0),
            ("The sound is a guitar. <answer>Guitar</answer>", 1.0),  # the case: 0 under zoo's default
            ("<think>strings</think><answer>Guitar</answer>", 1.0),
            ("<answer>Piano</answer>", 1.0),
            ("<answer>guitar</answer>", 1.0),
            ("<answer>Banjo</answer>", 1.0),
            ("<answer></answer>", 1.0),
            ("Guitar, I think.", 0.0),
        ],
    )


# zifuwanggg/Jigsaw-R1 utils/reward.py (commit 9c959df) with grpo.py's weights 1 and 0.5,
# non-thinking: accuracy reads the last capital letter of the output (the output itself when it has
# none) and compares it case-insensitively; format is 1 when the output is one uppercase letter.
# Left out: an uppercase letter that names no option (format 1 there, 0 here) and blanks around a
# lone letter.
def test_jigsaw_r1():
    task = config_task("jigsaw_r1", "JigsawPair")
    example = example_of(task, "image")
    right = task.answer_text(example)
    wrong = "B" if right == "A" else "A"
    check(
        task,
        example,
        [
            (right, 1.5),
            (wrong, 0.5),
            (right.lower(), 1.0),
            (f"({right})", 1.0),
            (f"The answer is {right}", 1.0),
            (f"The answer is {right.lower()}", 0.0),
            (f"{right} or {wrong}", 0.0),
        ],
    )


# UbiquitousLearning/UIShift train/grpo_uishift.py (commit 26d3284): format_reward is 1 when
# <answer>.*?</answer> occurs anywhere; action_reward reads the JSON of the first such block; weight
# 1 each. zoo's JSON keys are its own (action/x/y/... for action_type/.../app_name), so the table
# writes zoo's keys. Left out: code fences and the whole completion read as JSON when it holds no
# tag.
def test_ui_shift():
    task = config_task("ui_shift", "GUIInverseDynamics")
    example = example_of(task, "gui")
    right = task.answer_text(example)
    wrong = '{"action": "open_app", "app": "Nowhere"}' if example.answer["action"] != "open_app" else None
    assert wrong is not None
    check(
        task,
        example,
        [
            (f"<answer>{right}</answer>", 2.0),
            (f"The screen changed. <answer>{right}</answer>", 2.0),
            (f"<answer>{wrong}</answer>", 1.0),
            ("<answer>no idea</answer>", 1.0),
            ("I clicked. {}", 0.0),
        ],
    )


# lcqysl/VideoSSR verl/verl/utils/reward_score/{jigsaw,grounding,counting}.py: only the readme is in
# the reference index, so PAPERS.md section 3.3 and its checks in section 12: bare answers, no
# format reward; jigsaw 1 - footrule / floor(n^2 / 2) of a valid digit string, grounding the IoU of
# a whole "s-e" answer, counting the mean per-kind score of exactly three numbers found anywhere.
# Left out: jigsaw orders written with commas (read here, 0 there).
def test_videossr():
    jigsaw = config_task("videossr", "TemporalJigsaw")
    order = Example([], [4, 5, 2, 3, 1, 6], jigsaw.name, {})
    check(jigsaw, order, [("452316", 1.0), ("542316", 1 - 2 / 18), ("613254", 0.0), ("Answer: 452316", 0.0)])
    grounding = config_task("videossr", "AnomalyGrounding")
    interval = Example([], [6.9, 9.2], grounding.name, {})
    check(grounding, interval, [("5.0-10.0", 2.3 / 5.0), ("It is 5.0-10.0", 0.0)])
    counting = config_task("videossr", "ObjectCounting")
    counts = Example([], [3, 2, 3], counting.name, {})
    check(counting, counts, [("3,2,2", (1 + 1 + 2 / 3) / 3), ("The answer is 3, 2, 3", 1.0), ("3,2", 0.0)])


@pytest.mark.parametrize(
    "configs",
    [
        ["spatial_ssrl", "spatial_ssrl_depth"],
        ["ssl4rl_rotation", "ssl4rl_jigsaw", "ssl4rl_position", "ssl4rl_contrastive"],
        ["visual_jigsaw_image", "visual_jigsaw_video", "visual_jigsaw_3d"],
    ],
)
def test_every_task_of_a_paper_reads_alike(configs):
    """The tables check one task per paper; its other tasks and configs read completions the same
    way."""
    readings = set()
    for config in configs:
        data = yaml.safe_load((CONFIGS / f"{config}.yaml").read_text())["data"]["init_args"]
        for spec in data["tasks"]:
            readings.add(config_task(config, spec["class_path"].removeprefix("tasks.")).reading)
    assert len(readings) == 1, readings
