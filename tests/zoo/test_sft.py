"""SFT trains exactly the assistant tokens, whatever the padding, the micro-batching or the
family."""

import json
import random
from functools import partial

import pytest
import torch
from lightning.pytorch import Trainer

from callbacks import GRPOMetrics
from datamodules import ConversationDataModule, Conversations, PretextDataModule, Replies, SyntheticScenes
from tasks import Rotation
from tests.helpers import make_item
from tests.zoo.test_policy_contract import CASES, examples_for
from zoo import QwenVLPolicy
from zoo.sft import SFTStrategy, teacher_forced
from zoo.sft import functional as F
from zoo.training import row_lengths

# "<image>" opens the first user turn; two assistant turns, so two training rows
CONVERSATION = {
    "image": "red.png",
    "conversations": [
        {"from": "human", "value": "<image>\nWhat is in the picture?"},
        {"from": "gpt", "value": "A bus."},
        {"from": "human", "value": "And its name?"},
        {"from": "gpt", "value": "Zoo"},
    ],
}


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    module = QwenVLPolicy("tiny:qwen2_5_vl")
    module.configure_model()
    return module


def conversation_examples(root):
    make_item("image", 0).save(root / "red.png")
    (root / "chat.jsonl").write_text(json.dumps(CONVERSATION) + "\n")
    source, task = Conversations(str(root / "chat.jsonl")), Replies()
    return [task.make_example(source[i], random.Random(0)) for i in range(len(source))]


def reference_nll(policy, example, reply: str) -> tuple[float, int]:
    """Summed NLL and count of the reply's tokens from one unpadded forward over the checkpoint's
    own rendering of the whole conversation (the reply is its last turn; the tiny Qwen template ends
    it with <|im_end|>)."""
    messages = example.messages + [{"role": "assistant", "content": [{"type": "text", "text": reply}]}]
    text = policy.processor.apply_chat_template(messages, tokenize=False)
    images = [p["image"] for m in example.messages for p in m["content"] if p["type"] == "image"] or None
    inputs = policy.processor(text=[text], images=images, return_tensors="pt")
    k = len(policy.tokenizer(reply, add_special_tokens=False)["input_ids"]) + 1  # + <|im_end|>
    ids = inputs["input_ids"][0]  # [T]
    assert policy.tokenizer.decode(ids[-k:]) == reply + "<|im_end|>"
    with torch.no_grad():
        logits = policy.model(**inputs).logits[0, -k - 1 : -1].float()  # [k, V]
    logits[:, policy.banned_ids] = float("-inf")
    return float(-logits.log_softmax(-1).gather(-1, ids[-k:, None]).sum()), k


def test_multi_turn_loss_counts_exactly_the_assistant_tokens(policy, tmp_path):
    """A two-turn conversation beside a rotation prompt with another image and answer length:
    prompts are left padded, completions right padded. Exactly the reply tokens plus each turn's
    <|im_end|> are trained, and each row's loss is that of the unpadded whole conversation."""
    conversation = conversation_examples(tmp_path)
    assert [ex.answer for ex in conversation] == ["A bus.", "Zoo"]
    assert [m["role"] for m in conversation[1].messages] == ["user", "assistant", "user"]  # the history
    rotation = Rotation(labels="letters", answer_format="bare")
    pretext = rotation.make_example(make_item("image", 1), random.Random(0))
    examples, replies = [*conversation, pretext], ["A bus.", "Zoo", rotation.demonstration(pretext)]
    rollout, dropped = teacher_forced(policy, examples, replies)
    mask = rollout.completion_mask
    # "A bus." is A, " b", u, s, "." (5) and "Zoo" is Z, o, o (3), each + <|im_end|>; the letter
    # answer: 1 + 1
    assert mask.sum(1).tolist() == [6, 4, 2] and not dropped.any()
    decoded = [policy.tokenizer.decode(ids[row]) for ids, row in zip(rollout.completion_ids, mask, strict=True)]
    assert decoded == [r + "<|im_end|>" for r in replies]
    attention = rollout.prompts.tensors["attention_mask"]
    assert not attention[:, 0].all() and not mask[:, -1].all()  # both kinds of padding are present
    for trim in (True, False):
        policy.trim_padding = trim
        with torch.no_grad():
            logps = policy.token_scores(rollout, torch.arange(3))["logps"]
        for row, (example, reply) in enumerate(zip(examples, replies, strict=True)):
            expected, count = reference_nll(policy, example, reply)
            assert F.sft_loss(logps[row : row + 1], mask[row : row + 1], divisor=1.0).item() == pytest.approx(
                expected, abs=1e-4
            )
            assert count == int(mask[row].sum())
    policy.trim_padding = True


def test_a_demonstration_holding_a_media_placeholder_is_left_out(policy):
    rotation = Rotation(labels="letters", answer_format="bare")
    examples = [rotation.make_example(make_item("image", i), random.Random(i)) for i in range(2)]
    rollout, dropped = teacher_forced(policy, examples, ["A", "B<|image_pad|>"])
    assert dropped.tolist() == [False, True]
    assert rollout.completion_mask.sum(1).tolist() == [2, 0]


def test_long_demonstrations_are_cut(policy):
    rotation = Rotation(labels="letters", answer_format="bare")
    example = rotation.make_example(make_item("image", 0), random.Random(0))
    rollout, _ = teacher_forced(policy, [example, example], ["Zoo", "A"], max_tokens=2)
    assert rollout.completion_mask.sum(1).tolist() == [2, 2] and rollout.truncated.tolist() == [True, False]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}-{c[1]}")
def test_every_family_trains_the_reply_tokens_alone_and_in_a_batch_alike(case):
    """Every family: the trained tokens are the reply's and its end-of-turn token, and the row with
    the shortest prompt (the most left padding) scores the same in the padded batch as alone."""
    cls, checkpoint = case
    torch.manual_seed(0)
    module = cls(pretrained=checkpoint)
    module.configure_model()
    examples = examples_for(module)
    replies = ["Zoo", "A bus.", "Yes"] * len(examples)
    replies = replies[: len(examples)]
    rollout, dropped = teacher_forced(module, examples, replies)
    assert not dropped.any()
    counts = [len(module.tokenizer(r, add_special_tokens=False)["input_ids"]) + 1 for r in replies]
    assert rollout.completion_mask.sum(1).tolist() == counts
    row = int(rollout.prompts.tensors["attention_mask"].sum(1).argmin())
    alone, _ = teacher_forced(module, examples[row : row + 1], replies[row : row + 1])
    with torch.no_grad():
        together = module.token_scores(rollout, torch.arange(len(examples)))["logps"]
        logps = module.token_scores(alone, torch.arange(1))["logps"]
    torch.testing.assert_close(together[row, : counts[row]], logps[0, : counts[row]], atol=2e-4, rtol=0)


def rotation_data(batch_size: int) -> PretextDataModule:
    """Rotation demonstrations whose lengths differ: "0", "90", "180", "270", each + <|im_end|>."""
    return PretextDataModule(
        SyntheticScenes(size=64, image_size=56), Rotation(answer_format="bare"), batch_size=batch_size, val_size=0
    )


def fit_once(batch_size=4, accumulate=1, micro_batch_size=None, normaliser="token", steps=1, tokens=None):
    """``steps`` SFT updates by plain SGD (lr 1: the update is the gradient); returns the trained
    policy. ``tokens``: ``max_tokens_per_micro_batch``."""
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.SGD, lr=1.0))
    data = rotation_data(batch_size)
    strategy = SFTStrategy(
        micro_batch_size=micro_batch_size, max_tokens_per_micro_batch=tokens, normaliser=normaliser, max_grad_norm=None
    )
    trainer = Trainer(
        max_steps=steps,
        strategy=strategy,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[GRPOMetrics(summary=False)],
        num_sanity_val_steps=0,
        limit_val_batches=0,
        accumulate_grad_batches=accumulate,
    )
    trainer.fit(policy, data)
    return policy, trainer


@pytest.mark.parametrize("normaliser", F.NORMALISERS)
def test_update_is_the_same_however_the_step_is_split(normaliser):
    """One optimizer step over 4 demonstrations of different lengths: whole, in micro-batches of 1,
    packed 2 a pass by a token budget, or as 2 accumulated batches of 2, gives the update of the
    global mean, computed here by hand."""
    whole, trainer = fit_once(normaliser=normaliser)
    data = rotation_data(4)
    examples = next(iter(data.train_dataloader()))  # batch 0, which the runs train on
    lengths = [len(data.demonstration(ex)) for ex in examples]
    assert len(set(lengths)) > 1, lengths  # lengths differ: a mean per chunk would give another update
    torch.manual_seed(0)
    reference = QwenVLPolicy("tiny:qwen2_5_vl")
    reference.configure_model()
    before = {n: p.detach().clone() for n, p in reference.named_parameters()}
    rollout, _ = teacher_forced(reference, examples, [data.demonstration(ex) for ex in examples])
    logps = reference.token_scores(rollout, torch.arange(4))["logps"]
    F.sft_loss(logps, rollout.completion_mask, normaliser).backward()
    expected = {n: before[n] - p.grad for n, p in reference.named_parameters()}
    for other in (
        fit_once(micro_batch_size=1, normaliser=normaliser)[0],
        fit_once(tokens=2 * max(row_lengths(rollout, torch.arange(4)).sum(1).tolist()) + 1, normaliser=normaliser)[0],
        fit_once(batch_size=2, accumulate=2, normaliser=normaliser)[0],
        whole,
    ):
        for name, param in other.named_parameters():
            torch.testing.assert_close(param.detach(), expected[name], atol=1e-5, rtol=1e-4, msg=name)


def test_metrics_token_accuracy_and_skips_from_a_conversation_file(tmp_path):
    """SFT on a chat file whose rows are partly broken: they are skipped and counted at read time,
    an image that does not decode skips its turn when used, and training logs loss and token
    accuracy."""
    make_item("image", 0).save(tmp_path / "ok.png")
    (tmp_path / "broken.png").write_bytes(b"not a png")
    good = [
        {
            "images": ["ok.png"],
            "conversations": [{"from": "human", "value": f"<image>Say {w}."}, {"from": "gpt", "value": w}],
        }
        for w in ("yes", "no", "maybe")
    ]
    rows = [
        *good,
        {"conversations": [{"from": "human", "value": "Hi"}]},  # no assistant turn
        {"image": "../outside.png", "conversations": CONVERSATION["conversations"]},  # leaves the root
        {"image": "broken.png", "conversations": CONVERSATION["conversations"][:2]},
    ]  # fails when decoded
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    source = Conversations(str(tmp_path / "chat.jsonl"))
    assert source.skipped_rows == 3 and len(source) == 4
    data = ConversationDataModule(source, batch_size=2, val_size=0)
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", optimizer=partial(torch.optim.AdamW, lr=1e-3))
    trainer = Trainer(
        max_steps=3,
        strategy=SFTStrategy(micro_batch_size=1),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[GRPOMetrics(summary=False)],
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    trainer.fit(policy, data)
    logged = trainer.callback_metrics
    assert trainer.global_step == 3 and data.skipped >= 1 and logged["data/skipped"] >= 1
    assert 0 <= logged["train/sft/token_accuracy"] <= 1 and torch.isfinite(logged["train/sft/loss"])


def test_lora_sft_trains_only_the_adapters():
    torch.manual_seed(0)
    policy = QwenVLPolicy("tiny:qwen2_5_vl", lora={"rank": 2}, optimizer=partial(torch.optim.AdamW, lr=1e-2))
    data = rotation_data(2)
    trainer = Trainer(
        max_steps=1,
        strategy=SFTStrategy(),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    policy.configure_model()
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    trainer.fit(policy, data)
    changed = {n for n, p in policy.named_parameters() if not torch.equal(before[n], p.detach())}
    assert changed and all(".lora_" in n for n in changed)
