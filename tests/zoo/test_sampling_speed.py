"""`python -m zoo.tools.sampling_speed`: its raw decode loop does the model work `generate` does,
and it reports both measurements."""

import torch

from zoo.tools import sampling_speed


def test_the_raw_loop_decodes_what_generate_decodes():
    policy = sampling_speed.tiny_policy(vocab=700)  # resized: the rows past the tokenizer are banned
    examples = sampling_speed.rotation_examples(3, 56)
    with torch.no_grad():
        raw = sampling_speed.raw_loop(policy, examples, 2, 6, temperature=0.0)
        zoo = policy.sample(examples, 2, max_new_tokens=6, greedy=True)
    assert torch.equal(raw, zoo.completion_ids)  # EOS banned: every row runs to the limit
    assert not torch.isin(raw, torch.tensor(policy.banned_ids)).any()


def test_the_report_names_both_measurements(capsys):
    sampling_speed.main(["--repeats", "1", "--rows", "2", "--prompts", "1", "--generations", "2", "--new-tokens", "2"])
    out = capsys.readouterr().out
    assert "151936 vocabulary rows" in out and "gumbel" in out and "inverse_cdf" in out
    assert "zoo_sample" in out and "raw_loop" in out and "raw_greedy" in out
