"""`zoo.tools.scale`: the real-width config it builds and the growth it fits (the measurement itself
needs several GB and minutes: run by hand, see docs/performance.md)."""

import pytest

from zoo.tools.scale import fit, real_width_config, table


def test_the_config_has_the_3b_widths_and_vocabulary_with_few_layers():
    config = real_width_config(text_layers=1, vision_blocks=1)
    text = config.get_text_config()
    assert (text.hidden_size, text.intermediate_size, text.vocab_size) == (2048, 11008, 151936)
    assert (text.num_attention_heads, text.num_key_value_heads, text.num_hidden_layers) == (16, 2, 1)
    assert config.tie_word_embeddings and text.tie_word_embeddings
    assert (config.vision_config.depth, config.vision_config.hidden_size) == (1, 1280)
    assert config.vision_config.out_hidden_size == text.hidden_size


def test_fit_recovers_a_line_and_the_table_reports_it():
    assert fit([(100, 250.0), (200, 450.0), (400, 850.0)]) == pytest.approx((50.0, 2.0))
    result = {"tokens": 100, "before_mib": 1000.0, "peak_mib": 1330.0, "cpu_s": 1.0}
    results = [
        {**result, "setting": {"rows": 16, "length": 8, "chunk": None}},
        {**result, "tokens": 200, "peak_mib": 1660.0, "setting": {"rows": 16, "length": 16, "chunk": None}},
    ]
    text = table(results)
    assert "| full logits | 16 x 8 | 100 | 330 | 3.300 | 1 |" in text
    assert "full logits: 0 MiB + 3.300 MiB per scored token" in text
