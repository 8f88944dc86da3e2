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
