"""GRPO steps of the spliced policies (PointLMPolicy, EncoderLMPolicy) and of tiny Qwen-VL on
rendered point clouds, through Lightning like `zoo fit`; plus what the encoder -> LM splice must get
right."""

import random
from functools import partial

import numpy as np
import pytest
import torch

from datamodules import PointCloudFolder, PretextDataModule, SyntheticPointClouds, SyntheticScenes
from tasks import PointCloudJigsaw, PointCloudRotation, Rotation
from tests.helpers import grpo_fit, make_item
from zoo import EncoderLMPolicy, PointLMPolicy, QwenVLPolicy, tiny
from zoo.point_lm import farthest_points


def fit(policy, data: PretextDataModule, steps: int = 2):
    return grpo_fit(policy, data, steps)


def adamw():
    return partial(torch.optim.AdamW, lr=1e-3)


@pytest.mark.parametrize(
    "task", [PointCloudRotation(answer_format="bare"), PointCloudJigsaw(num_slabs=3)], ids=lambda t: t.name
)
def test_point_lm_grpo_steps(task):
    torch.manual_seed(0)
    policy = PointLMPolicy("tiny:qwen2", num_tokens=8, optimizer=adamw())
    data = PretextDataModule(SyntheticPointClouds(size=20, num_points=64), task, batch_size=2, val_size=2, epoch_size=4)
    trainer = fit(policy, data)
    assert f"val/{task.name}/accuracy" in trainer.callback_metrics
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in policy.parameters())


def test_point_lm_grpo_on_ply_files_with_a_corrupt_one(tmp_path):
    o3d = pytest.importorskip("open3d", exc_type=ImportError)  # with libusb-1.0 preloaded (conftest)
    for i in range(4):
        points = make_item("point_cloud", i).points
        pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points[:, :3].astype(np.float64)))
        pcd.colors = o3d.utility.Vector3dVector(points[:, 3:].astype(np.float64))
        assert o3d.io.write_point_cloud(str(tmp_path / f"ok{i}.ply"), pcd)
    (tmp_path / "broken.ply").write_bytes(b"ply\nformat ascii 1.0\nelement vertex 5\nend_header\n1 2\n")
    data = PretextDataModule(
        PointCloudFolder(str(tmp_path), num_points=64),
        PointCloudRotation(answer_format="bare"),
        batch_size=2,
        val_size=0,
        epoch_size=8,
    )
    torch.manual_seed(0)
    fit(PointLMPolicy("tiny:qwen2", num_tokens=8, optimizer=adamw()), data, steps=3)
    assert data.skipped >= 1


def test_encoder_lm_grpo_steps_with_a_frozen_backbone():
    torch.manual_seed(0)
    policy = EncoderLMPolicy("tiny:qwen2", freeze=["vision"], optimizer=adamw())
    data = PretextDataModule(
        SyntheticScenes(size=20, image_size=56),
        Rotation(labels="letters", answer_format="bare"),
        batch_size=2,
        val_size=2,
        epoch_size=4,
    )
    fit(policy, data)
    assert not any(p.requires_grad for p in policy.model.encoder.parameters())
    assert policy.model.encoder.num_tokens == 25  # test_convnext: a 5 x 5 feature map at 160 px


def test_qwen_vl_grpo_steps_on_rendered_point_clouds():
    torch.manual_seed(0)
    task = PointCloudRotation(render=True, image_size=56, answer_format="bare")
    data = PretextDataModule(
        SyntheticPointClouds(size=20, num_points=128), task, batch_size=2, val_size=2, epoch_size=4
    )
    trainer = fit(QwenVLPolicy("tiny:qwen2_5_vl", optimizer=adamw()), data)
    assert f"train/reward/{task.name}/accuracy" in trainer.callback_metrics


def test_point_features_reach_the_lm_and_padding_does_not_change_a_row():
    torch.manual_seed(0)
    policy = PointLMPolicy("tiny:qwen2", num_tokens=8)
    policy.configure_model()
    task = PointCloudRotation(answer_format="bare")
    example = task.make_example(make_item("point_cloud", 0), random.Random(0))
    other = task.make_example(make_item("point_cloud", 5), random.Random(0))
    long = PointCloudJigsaw(num_slabs=4).make_example(make_item("point_cloud", 1), random.Random(1))

    def last_logits(examples):
        inputs = policy.encode(examples).select(range(len(examples)))
        with torch.no_grad():
            return policy.model(**inputs).logits[:, -1]  # [B, V]

    alone = last_logits([example])[0]
    padded = last_logits([long, example])[1]  # left padded next to a longer prompt with 4 clouds
    torch.testing.assert_close(padded, alone, atol=1e-4, rtol=0)
    assert not torch.allclose(last_logits([other])[0], alone, atol=1e-3)  # the cloud matters


def test_encoder_groups_cover_the_extremes_and_are_deterministic():
    xyz = torch.rand(2, 200, 3)
    xyz[0, 17] = torch.tensor([9.0, 9.0, 9.0])
    chosen = farthest_points(xyz, 12)
    assert chosen.shape == (2, 12) and all(len(set(row.tolist())) == 12 for row in chosen)
    assert chosen[0, 0] == 17 and torch.equal(chosen, farthest_points(xyz, 12))


def test_reference_model_equals_the_initial_policy_and_saved_dirs_restore_settings(tmp_path):
    policy = PointLMPolicy("tiny:qwen2", num_tokens=6, group_size=5, width=32)
    policy.configure_model()
    reference, _ = policy.load(tiny.resolve("tiny:qwen2"))
    for (name, a), b in zip(policy.model.state_dict().items(), reference.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    policy.save_pretrained(str(tmp_path))
    reloaded = PointLMPolicy(str(tmp_path))  # default num_tokens=16 is overridden by the saved settings
    reloaded.configure_model()
    assert reloaded.model.encoder.num_tokens == 6 and reloaded.model.encoder.out_dim == 32
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(str(tmp_path)).config.model_type == "qwen2"  # a plain LM too


@pytest.mark.parametrize("backbone, tokens", [("test_vit", 16), ("test_convnext", 4)])
def test_encoder_lm_builds_any_timm_backbone_for_the_image_size(backbone, tokens):
    policy = EncoderLMPolicy("tiny:qwen2", backbone=backbone, image_size=64)
    policy.configure_model()
    assert policy.model.encoder.num_tokens == tokens  # 64 px: 4 x 4 ViT patches, a 2 x 2 ConvNeXt map
    example = Rotation(labels="letters", answer_format="bare").make_example(make_item("image"), random.Random(0))
    batch = policy.encode([example])
    assert batch.tensors["pixel_values"].shape == (1, 3, 64, 64)
    assert int((batch.tensors["input_ids"] == policy.model.placeholder_id).sum()) == tokens


def test_a_lora_point_lm_exports_merged_weights_that_reload_with_the_same_logits(tmp_path):
    torch.manual_seed(0)
    policy = PointLMPolicy(
        "tiny:qwen2", num_tokens=6, group_size=5, width=32, lora={"rank": 4, "groups": ["llm", "encoder"]}
    )
    policy.configure_model()
    with torch.no_grad():  # adapters start as a no-op: move them so the merge has something to carry
        for name, param in policy.named_parameters():
            if "lora_" in name:
                param.add_(0.05 * torch.randn_like(param))
    policy.save_pretrained(str(tmp_path))
    reloaded = PointLMPolicy(str(tmp_path))
    reloaded.configure_model()
    assert not [n for n in reloaded.state_dict() if "lora_" in n]
    batch = policy.encode(
        [PointCloudRotation().make_example(make_item("point_cloud", i), random.Random(i)) for i in range(2)]
    ).tensors
    policy.model.eval()
    reloaded.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded.model(**batch).logits, policy.model(**batch).logits, atol=1e-5, rtol=1e-5)
