"""`zoo.tiny` builds complete pretrained directories, on any rank of a process group, from the
``TINY`` tables the family files own; the cache key follows every builder."""

import sys
import types

import pytest
import torch

import zoo
from tests.helpers import discover
from zoo import tiny
from zoo.policy import PolicyModule


def test_a_build_on_a_non_zero_rank_writes_the_model_too(tmp_path, monkeypatch):
    # DDP ranks race to build a tiny model and the first to finish publishes it; transformers'
    # save_pretrained writes nothing on ranks other than 0, which once published a directory without
    # config.json
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *args, **kwargs: 1)
    out = tiny.build("qwen2", tmp_path / "rank1")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}


def test_the_3b_shape_family_has_qwen2_5_vl_3b_parameters():
    """`tiny:qwen2_5_vl_3b` (GPU speed measurements) carries Qwen2.5-VL-3B-Instruct's shapes: about
    3.75B parameters, counted on the meta device without allocating them."""
    from transformers import AutoModelForImageTextToText

    spec = tiny.families()["qwen2_5_vl_3b"]
    config, processor = spec.make()
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, dtype=spec.dtype)
    parameters = sum(p.numel() for p in model.parameters())
    assert 3.7e9 < parameters < 3.8e9, parameters
    assert next(model.parameters()).dtype == torch.bfloat16
    assert config.vision_config.depth == 32 and config.text_config.num_hidden_layers == 36
    assert processor.tokenizer.convert_tokens_to_ids("<|image_pad|>") == config.image_token_id


def test_every_policy_tiny_checkpoint_is_a_family_its_file_lists():
    families = tiny.families()
    for cls in discover(zoo, PolicyModule):
        for checkpoint in cls.tiny_checkpoints:
            assert checkpoint.removeprefix("tiny:") in families, f"{cls.__name__}: {checkpoint}"
    assert families["qwen2_5_vl"].make.__module__ == "zoo.qwen_vl"
    assert families["gemma3"].init is not None and families["qwen2_5_vl_3b"].dtype == torch.bfloat16


@pytest.fixture
def family_file(tmp_path, monkeypatch):
    """A zoo module ``zoo.tiny_test_family`` with a TINY table, defined in a file of this test."""
    path = tmp_path / "family.py"
    path.write_text("TINY = {}\n")
    module = types.ModuleType("zoo.tiny_test_family")
    module.__file__, module.TINY = str(path), {"test_family": tiny.Tiny(make=lambda: None)}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return path


def test_the_cache_key_changes_when_any_family_file_changes(family_file):
    before = tiny.version()
    assert "test_family" in tiny.families()
    family_file.write_text("TINY = {}  # a builder edited\n")
    assert tiny.version() != before


def test_a_family_defined_twice_is_refused(family_file, monkeypatch):
    twin = types.ModuleType("zoo.tiny_test_twin")
    twin.__file__, twin.TINY = str(family_file), {"qwen2": tiny.Tiny(make=lambda: None)}
    monkeypatch.setitem(sys.modules, twin.__name__, twin)
    with pytest.raises(ValueError, match="tiny:qwen2 is defined twice"):
        tiny.families()
