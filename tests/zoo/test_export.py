"""`zoo export`: a checkpoint becomes a Hugging Face directory whose logits equal the trained
policy's."""

import random

import pytest
import torch
from safetensors import safe_open

from tasks import Rotation
from tests.helpers import make_item
from zoo import QwenVLPolicy
from zoo.checkpoints import read_checkpoint
from zoo.cli import main


def trained_checkpoint(path, lora):
    """A policy whose trainable weights moved away from the base, saved as a Lightning checkpoint
    would be."""
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", lora=lora)
    policy.configure_model()
    with torch.no_grad():
        for param in policy.parameters():
            if param.requires_grad:
                param.add_(0.05 * torch.randn_like(param))
    checkpoint = {"state_dict": policy.state_dict(), "hyper_parameters": dict(policy.hparams)}
    policy.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return policy


@pytest.mark.parametrize("lora", [None, {"rank": 4, "groups": ["llm", "vision"]}], ids=["full", "lora"])
def test_exported_model_has_the_policys_logits(lora, tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    policy = trained_checkpoint(tmp_path / "run.ckpt", lora)
    assert read_checkpoint(tmp_path / "run.ckpt")["policy_class"] == "zoo.qwen_vl.QwenVLPolicy"
    main(["export", "--ckpt", str(tmp_path / "run.ckpt"), "--out", str(tmp_path / "hf")])

    task = Rotation()
    examples = [task.make_example(make_item("image", i), random.Random(i)) for i in range(2)]
    batch = policy.encode(examples).tensors
    exported = AutoModelForImageTextToText.from_pretrained(tmp_path / "hf").eval()
    policy.model.eval()
    with torch.no_grad():
        expected, found = policy.model(**batch).logits, exported(**batch).logits
    torch.testing.assert_close(found, expected, atol=1e-5, rtol=1e-5)

    processor = AutoProcessor.from_pretrained(tmp_path / "hf")
    assert processor.chat_template == policy.processor.chat_template
    text = processor.apply_chat_template(examples[0].messages, tokenize=False, add_generation_prompt=True)
    again = processor(text=[text], images=[examples[0].messages[0]["content"][0]["image"]], return_tensors="pt")
    torch.testing.assert_close(again["input_ids"], batch["input_ids"][:1][batch["attention_mask"][:1].bool()][None])
    with safe_open(tmp_path / "hf" / "model.safetensors", "pt") as f:
        assert not [k for k in f.keys() if "lora_" in k or "base_layer" in k]


def test_export_of_a_missing_checkpoint_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "--ckpt", str(tmp_path / "none.ckpt"), "--out", str(tmp_path / "hf")])
    (line,) = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 1 and line.startswith("zoo export: error: no checkpoint at")
