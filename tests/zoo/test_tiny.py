"""`zoo.tiny` builds complete pretrained directories, on any rank of a process group."""

import torch

from zoo import tiny


def test_a_build_on_a_non_zero_rank_writes_the_model_too(tmp_path, monkeypatch):
    # DDP ranks race to build a tiny model and the first to finish publishes it; transformers' save_pretrained
    # writes nothing on ranks other than 0, which once published a directory without config.json
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *args, **kwargs: 1)
    out = tiny.build("qwen2", tmp_path / "rank1")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}


def test_the_3b_shape_family_has_qwen2_5_vl_3b_parameters():
    """`tiny:qwen2_5_vl_3b` (GPU benchmarks) carries Qwen2.5-VL-3B-Instruct's shapes: about 3.75B parameters,
    counted on the meta device without allocating them."""
    from transformers import AutoModelForImageTextToText

    config, processor = tiny.FAMILIES["qwen2_5_vl_3b"](tiny.build_tokenizer())
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, dtype=tiny.SAVE_DTYPES["qwen2_5_vl_3b"])
    parameters = sum(p.numel() for p in model.parameters())
    assert 3.7e9 < parameters < 3.8e9, parameters
    assert next(model.parameters()).dtype == torch.bfloat16
    assert config.vision_config.depth == 32 and config.text_config.num_hidden_layers == 36
    assert processor.tokenizer.convert_tokens_to_ids("<|image_pad|>") == config.image_token_id
