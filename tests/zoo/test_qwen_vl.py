"""Qwen-VL specifics: placeholder checks and video inputs per family."""

import pytest
import torch

from tests.zoo.test_policy_contract import image_examples, video_examples
from zoo import QwenVLPolicy
from zoo.qwen_vl import PLACEHOLDERS, check_vision_placeholders


@pytest.fixture(scope="module", params=QwenVLPolicy.tiny_checkpoints)
def policy(request):
    module = QwenVLPolicy(request.param)
    module.configure_model()
    return module


def test_placeholder_count_mismatch_is_a_clear_error(policy):
    tensors = dict(policy.encode(image_examples()[:1]).tensors)
    ids = tensors["input_ids"].clone()
    ids[ids == policy.tokenizer.convert_tokens_to_ids("<|image_pad|>")] = policy.eos_ids[0]
    tensors["input_ids"] = ids  # as if a template or truncation dropped the placeholders
    with pytest.raises(ValueError, match="image"):
        check_vision_placeholders(policy, tensors, PLACEHOLDERS)


def test_video_frame_rate_reaches_the_model(policy):
    batch = policy.encode(video_examples())
    grids = batch.tensors["video_grid_thw"]
    assert grids[:, 0].tolist() == [3, 2]  # 6 and 4 frames, two frames per temporal token
    assert batch.items == {"image": [0, 1], "video": [1, 1]}
    if "second_per_grid_ts" in batch.tensors:  # Qwen2.5-VL: seconds per temporal token = 2 / fps
        torch.testing.assert_close(batch.tensors["second_per_grid_ts"], torch.tensor([2 / 4.0, 2 / 1.0]))
    if policy.model.config.model_type == "qwen3_vl":  # timestamps written into the prompt
        text = policy.tokenizer.decode(batch.tensors["input_ids"][0])
        assert "seconds>" in text


def test_a_subclass_with_its_own_load_encodes(policy):
    class OwnLoad(QwenVLPolicy):
        def load(self, path: str):  # a model built some other way, as tests/gpu/check_fsdp.py does
            return policy.model, policy.processor

    own = OwnLoad(policy.pretrained)
    own.configure_model()
    batch = own.encode(image_examples() + video_examples())
    assert batch.items == {"image": [1, 2, 0, 0, 1], "video": [0, 0, 0, 1, 1]}
