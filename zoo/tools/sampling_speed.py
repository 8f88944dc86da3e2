"""What zoo's sampling costs, in CPU seconds, arms interleaved (median and min-max of the repeats).

1. One decoding step's sampling at the real vocabulary (151,936 rows, the last 271 banned as in
   Qwen2.5-VL): zoo's seeded inverse-CDF draw (`SeededSampling`) vs the seeded Gumbel-max noise it
   replaced (with generate's own suppression and temperature warper, as before).
2. `PolicyModule.sample` with zoo's decoding loop (``zoo_sample``; ``zoo_forward``: the same loop
   without `zoo.rollout.lean_step.LeanStep`) and with Hugging Face ``generate``
   (``zoo_generate``), all with prefix sharing and seeded sampling, vs a raw loop on
   the same model: the same prefill of the B prompts, the cache repeated G times, then one forward
   per token and ``torch.multinomial`` on the masked, tempered softmax (``raw_loop``) or the argmax
   (``raw_greedy``: the model's work alone). EOS is banned in all of them, so every row runs to the
   token limit. With ``--vocab`` the tiny model's vocabulary is resized to that many rows (random,
   past the tokenizer, so banned).

    python -m zoo.tools.sampling_speed --repeats 15 --vocab 151936
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from torch import Tensor
from transformers import SuppressTokensLogitsProcessor, TemperatureLogitsWarper
from transformers.cache_utils import DynamicCache

from zoo.rollout.decode import expand_cache
from zoo.rollout.hf import SeededSampling
from zoo.rollout.seeds import _GOLDEN, _shr, row_seeds, splitmix64

QWEN_VOCAB, QWEN_TOKENIZER = 151_936, 151_665  # Qwen2.5-VL's vocabulary rows and tokenizer length


def gumbel_noise(seeds: Tensor, position: int, vocab: int) -> Tensor:
    """The noise zoo sampled with before: Gumbel(0, 1) ``[N, V]`` hashed from (row seed, position,
    token id), float64."""
    base = splitmix64(seeds ^ splitmix64(torch.full_like(seeds, position)))[:, None]  # [N, 1]
    bits = splitmix64(base + torch.arange(1, vocab + 1, device=seeds.device)[None, :] * _GOLDEN)  # [N, V]
    uniform = (_shr(bits, 11).double() + 0.5) / float(1 << 53)  # (0, 1)
    return -torch.log(-torch.log(uniform))


def gumbel_step(seeds: Tensor, banned: list[int], temperature: float):
    """The sampling of one step as zoo did it before: suppression, temperature, Gumbel noise."""
    suppress, warp = SuppressTokensLogitsProcessor(banned), TemperatureLogitsWarper(temperature)

    def step(ids: Tensor, scores: Tensor) -> Tensor:
        scores = warp(ids, suppress(ids, scores))
        return (scores + gumbel_noise(seeds, ids.shape[1], scores.shape[-1]).float()).argmax(-1)

    return step


def interleaved(arms: dict, repeats: int) -> dict[str, dict]:
    """CPU seconds of each arm (a callable), the arms taking turns ``repeats`` times after one
    untimed round."""
    seconds = {name: [] for name in arms}
    for repeat in range(repeats + 1):
        for name, arm in arms.items():
            start = time.process_time()
            arm()
            if repeat:
                seconds[name].append(time.process_time() - start)
    return {
        name: {"median": statistics.median(s), "min": min(s), "max": max(s), "repeats": len(s)}
        for name, s in seconds.items()
    }


def step_costs(rows: int, vocab: int, banned_from: int, repeats: int, temperature: float = 1.0) -> dict:
    """One decoding step's sampling of ``rows`` rows, Gumbel noise (before) vs inverse CDF
    (now)."""
    scores = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0)) * 3  # [N, V]
    ids = torch.zeros(rows, 5, dtype=torch.long)  # the history: only its length (the position) is read
    seeds = row_seeds([str(n) for n in range(rows)], seed=0)
    banned = list(range(banned_from, vocab))
    now = SeededSampling(seeds, 0, temperature, banned_ids=banned)
    before = gumbel_step(seeds, banned, temperature)
    return interleaved(
        {"gumbel": lambda: before(ids, scores), "inverse_cdf": lambda: now(ids, scores).argmax(-1)}, repeats
    )


def raw_loop(policy, examples: list, n: int, new_tokens: int, temperature: float) -> Tensor:
    """Completions ``[B * n, new_tokens]`` from a plain prefill + decode loop on ``policy.model``:
    what sampling costs without ``generate``. Temperature 0 decodes greedily (to check the loop
    against ``generate``)."""
    model, batch = policy.model, policy.encode(examples)
    ids, mask = batch.tensors["input_ids"], batch.tensors["attention_mask"]  # [B, T]
    positions = model._prepare_position_ids_for_generation(ids, dict(batch.tensors))  # [..., B, T]
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    logits = model(**batch.tensors, position_ids=positions, cache=cache, logits_to_keep=1).logits[:, -1]
    expand_cache(cache, n)
    logits, mask = logits.repeat_interleave(n, 0), mask.repeat_interleave(n, 0)  # [N, V], [N, T]
    position = positions[..., -1:].repeat_interleave(n, dim=-2)  # [..., N, 1]; text: every component alike
    banned = torch.zeros(logits.shape[-1], dtype=torch.bool)
    banned[policy.banned_ids] = True
    tokens = []
    for _ in range(new_tokens):
        scores = logits.float().masked_fill(banned, float("-inf"))  # [N, V]
        greedy = temperature == 0
        tokens.append(
            scores.argmax(-1, keepdim=True) if greedy else torch.multinomial((scores / temperature).softmax(-1), 1)
        )
        mask, position = torch.cat([mask, torch.ones_like(tokens[-1])], 1), position + 1
        out = model(input_ids=tokens[-1], attention_mask=mask, position_ids=position, cache=cache)
        logits = out.logits[:, -1]
    return torch.cat(tokens, 1)


def tiny_policy(vocab: int | None):
    """The tiny Qwen2.5-VL, its vocabulary resized to ``vocab`` rows (random) when given, EOS
    banned so every row runs to the limit."""
    from zoo import QwenVLPolicy

    class Policy(QwenVLPolicy):
        def load(self, path: str):
            model, processor = super().load(path)
            if vocab:
                model.resize_token_embeddings(vocab, mean_resizing=False)
            return model, processor

    policy = Policy("tiny:qwen2_5_vl")
    policy.configure_model()
    policy.eval()
    policy.banned_ids = sorted(set(policy.banned_ids) | set(policy.eos_ids))
    return policy


def rotation_examples(count: int, image_size: int) -> list:
    from datamodules import SyntheticScenes
    from tasks import Rotation

    task, source = Rotation(labels="letters", answer_format="bare"), SyntheticScenes(size=count, image_size=image_size)
    return [task.make_example(source[i], random.Random(i)) for i in range(count)]


@torch.no_grad()
def sample_costs(args) -> dict:
    """``policy.sample`` vs `raw_loop`, sampled and greedy, on the same model, prompts and
    lengths."""
    policy = tiny_policy(args.vocab)
    examples = rotation_examples(args.prompts, args.image_size)
    n, length, temperature = args.generations, args.new_tokens, args.temperature

    def zoo(loop: str):
        def arm():
            policy.engine.loop = loop
            policy.sample(examples, n, max_new_tokens=length, temperature=temperature, seed=0)

        return arm

    arms = {
        "zoo_sample": zoo("zoo"),  # zoo's decoding loop (zoo.rollout.decode), lean steps
        "zoo_forward": zoo("forward"),  # the same loop through the model's own forward
        "zoo_generate": zoo("generate"),  # the same through Hugging Face generate, as before
        "raw_loop": lambda: raw_loop(policy, examples, n, length, temperature),
        "raw_greedy": lambda: raw_loop(policy, examples, n, length, 0.0),  # the model's work alone
    }
    return interleaved(arms, args.repeats)


def report(title: str, costs: dict, baseline: str) -> None:
    print(title)
    for name, c in costs.items():
        ratio = c["median"] / costs[baseline]["median"]
        print(f"  {name:12} {1000 * c['median']:9.1f} ms ({1000 * c['min']:.1f}-{1000 * c['max']:.1f}), {ratio:.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32, help="rows of the step measurement (B x G)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--image-size", type=int, default=56)
    parser.add_argument("--vocab", type=int, default=None, help="resize the tiny model's vocabulary")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    steps = step_costs(args.rows, QWEN_VOCAB, QWEN_TOKENIZER, args.repeats, args.temperature)
    report(f"one decoding step's sampling, {args.rows} rows x {QWEN_VOCAB} vocabulary rows:", steps, "inverse_cdf")
    vocab = args.vocab or "tiny"
    samples = sample_costs(args)
    title = f"{args.prompts} prompts x {args.generations}, {args.new_tokens} new tokens, vocabulary {vocab}:"
    report(title, samples, "raw_loop")


if __name__ == "__main__":
    main()
