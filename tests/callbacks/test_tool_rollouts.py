"""Multi-turn rollouts (tasks with tools) in the logs: RolloutSampler writes each row's turns and
a strip of the pictures its tools returned, and GRPO's window metrics count calls, invalid rows
and turns (scripted engine and `Look` tool of tests/zoo/test_turns.py)."""

import io
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from PIL import Image

from callbacks.rollout_media import THUMB_HEIGHT, tool_strip
from callbacks.rollouts import RolloutSampler
from tasks import Reward
from zoo.grpo.window import WindowBatch, add_window_metrics
from zoo.metrics import MetricMeans

G = 4


@pytest.fixture(scope="module")
def rollout():
    """Rows: look 1 then "A"; "B"; an invalid call; look 2 then a call with no turn left."""
    # imported here, not at collection: its task class would join the task contract tests
    from tests.zoo.test_turns import BOX, Scripted, example
    from zoo import QwenVLPolicy
    from zoo.rollout.turns import sample_turns

    policy = QwenVLPolicy("tiny:qwen2_5_vl", engine=Scripted())
    policy.configure_model()
    return sample_turns(policy, [example()], G, [BOX], max_new_tokens=32, seed=0)


def test_rollout_log_rows_carry_their_turns_and_a_strip_of_the_tool_results(tmp_path, rollout):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path / "tb")
    trainer = SimpleNamespace(
        global_step=3, loggers=[logger], log_dir=str(tmp_path), default_root_dir=str(tmp_path), is_global_zero=True
    )
    sampler = RolloutSampler(every_n_steps=1, max_rows=G)
    sampler.setup(trainer, None, "fit")
    outputs = {"rollout": rollout, "rewards": [Reward(float(n), {"accuracy": 0.0}) for n in range(G)]}
    sampler.on_train_batch_end(trainer, None, outputs, [], 0)
    rows = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["turns"] for r in rows] == [
        [{"text": "<look>1</look>", "call": True}, {"text": "A", "call": False}],
        [{"text": "B", "call": False}],
        [{"text": "<look>x</look>", "call": False}],
        [{"text": "<look>2</look>", "call": True}, {"text": "<look>1</look>", "call": True}],
    ]
    assert [r["calls"] for r in rows] == [1, 0, 0, 2] and [r["invalid"] for r in rows] == [False, False, True, False]
    assert rows[0]["completion"] == rollout.completions[0]  # the transcript
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    # rows 0 and 3 ran a call (row 3's second one had no turn left to see its result)
    tools = {tag for tag in events.Tags()["images"] if tag.endswith("/tools")}
    assert tools == {"rollouts/train/0/tools", "rollouts/train/3/tools"}
    for row, k in ((0, 1), (3, 2)):  # one grey image k * 28 x 28 each
        (image,) = events.Images(f"rollouts/train/{row}/tools")
        strip = np.asarray(Image.open(io.BytesIO(image.encoded_image_string)).convert("RGB"))
        assert strip.shape == (THUMB_HEIGHT, k * THUMB_HEIGHT, 3) and (strip == 100).all()
    texts = {
        n: events.Tensors(f"rollouts/train/{n}/text_summary")[0].tensor_proto.string_val[0].decode() for n in (2, 3)
    }
    assert "**turn 1 (call):** `<look>1</look>`" in texts[3] and "2 calls" in texts[3]
    assert "ended on an invalid action" in texts[2] and "invalid" not in texts[3]


def test_a_row_without_pictures_from_its_tools_has_no_strip():
    assert tool_strip([]) is None
    assert tool_strip([{"role": "user", "content": [{"type": "text", "text": "out of the image"}]}]) is None


def test_window_metrics_count_calls_invalid_rows_and_turns(rollout):
    means = MetricMeans()
    part = WindowBatch(rollout, torch.zeros(G), rollout.completion_mask, torch.arange(G))
    add_window_metrics(means, [part], [torch.zeros(1, G)])
    got = means.result()
    # calls 1, 0, 0, 2; invalid: row 2; turns 2, 1, 1, 2
    assert got["train/tools/calls"] == 0.75 and got["train/tools/invalid"] == 0.25 and got["train/tools/turns"] == 1.5
    single = WindowBatch(rollout.turns[0].rollout, torch.zeros(G), rollout.completion_mask, torch.arange(G))
    plain = MetricMeans()
    add_window_metrics(plain, [single], [torch.zeros(1, G)])
    assert not any(name.startswith("train/tools") for name in plain.result())
