"""A short `zoo fit` (2-process DDP, LoRA with a KL term, TensorBoard logger) writes rollout images
to TensorBoard and a curves PNG; its checkpoint exports to a Hugging Face directory with the same
logits."""

import json
import random
import sys

import pytest
import torch
from PIL import Image

from tests.helpers import make_item
from tests.test_cli import QUICKSTART, ROOT, run_dir, zoo

SHORT = [
    "--trainer.max_steps",
    "2",
    "--trainer.val_check_interval",
    "2",
    "--trainer.log_every_n_steps",
    "1",
    "--data.init_args.val_size",
    "8",
    "--data.init_args.batch_size",
    "4",
    "--rollouts.every_n_steps",
    "1",
]
LORA = ["--model.init_args.lora.rank", "4", "--trainer.strategy.init_args.beta", "0.04"]
TENSORBOARD = ["--trainer.logger", "lightning.pytorch.loggers.TensorBoardLogger", "--trainer.logger.save_dir", "runs"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("tensorboard")
    zoo(
        "fit",
        "--config",
        QUICKSTART,
        *SHORT,
        *LORA,
        *TENSORBOARD,
        "--trainer.devices",
        "2",
        "--trainer.strategy",
        "zoo.grpo.GRPODDPStrategy",
        cwd=cwd,
    )
    return run_dir(cwd)


def test_rollout_images_and_texts_reach_tensorboard(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # the directory holds one event file per trainer call (validation before fit, then fit)
    accumulator = EventAccumulator(str(run), size_guidance={"images": 0, "tensors": 0})
    accumulator.Reload()
    images = accumulator.Tags()["images"]
    assert {"rollouts/train/0", "rollouts/val/0"} <= set(images)
    image = accumulator.Images("rollouts/train/0")[0]
    assert image.height == 128 and image.width > 0 and image.encoded_image_string[:4] == b"\x89PNG"
    texts = [t for t in accumulator.Tags()["tensors"] if t.startswith("rollouts/train/0")]
    assert texts and "reward" in accumulator.Tensors(texts[0])[0].tensor_proto.string_val[0].decode()
    assert "train/reward" in accumulator.Tags()["scalars"] and "train/grpo/kl" in accumulator.Tags()["scalars"]
    rows = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]  # JSONL as before
    assert {"train", "val"} == {r["split"] for r in rows}


def test_curves_png_has_reward_accuracy_and_kl(run):
    path = run / "curves.png"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 500 and image.height > 200
        curves = image.text["Curves"].split(", ")
        pixels = torch.from_numpy(__import__("numpy").asarray(image.convert("L")))
    assert len(curves) > 1 and {"train/reward", "val/accuracy", "train/grpo/kl"} <= set(curves)
    assert pixels.float().std() > 10  # something is drawn


def test_export_of_the_lora_ddp_checkpoint(run, tmp_path):
    from transformers import AutoModelForImageTextToText

    from tasks import Rotation
    from zoo.cli import main
    from zoo.export import policy_from_checkpoint

    (ckpt,) = (run / "checkpoints").glob("*.ckpt")
    main(["export", "--ckpt", str(ckpt), "--out", str(tmp_path / "hf")])  # weights_only read of a real checkpoint
    policy = policy_from_checkpoint(ckpt).eval()
    assert policy.lora is not None and any(".lora_B." in n for n, _ in policy.named_parameters())
    task = Rotation(labels="letters", answer_format="bare")
    batch = policy.encode([task.make_example(make_item("image", i), random.Random(i)) for i in range(2)]).tensors
    exported = AutoModelForImageTextToText.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        torch.testing.assert_close(exported(**batch).logits, policy.model(**batch).logits, atol=1e-5, rtol=1e-5)


def test_a_missing_logger_package_is_a_clear_error(monkeypatch):
    from zoo.cli import cli

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed: find_spec gives None
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'zoo\[wandb\]'"):
        cli(["fit", "--config", QUICKSTART, "--trainer.logger", str(ROOT / "configs" / "logger" / "wandb.yaml")])


@pytest.mark.parametrize("group", sorted((ROOT / "configs" / "logger").glob("*.yaml")), ids=lambda p: p.name)
def test_logger_groups_parse(group):
    from tests.test_configs import parse_args

    config = parse_args(["--config", QUICKSTART, "--trainer.logger", str(group)]).config
    assert config.trainer.logger.class_path.startswith("lightning.pytorch.loggers.")
    assert config.trainer.strategy.init_args.num_generations == 8  # the experiment is untouched
