"""HFVLMPolicy on tiny Idefics3, Gemma 3 and LLaVA-OneVision: placeholders, banned tokens, groups,
export, GRPO."""

from functools import partial

import pytest
import torch
from lightning.pytorch import Trainer

from callbacks import GRPOMetrics
from datamodules import PretextDataModule, SyntheticScenes
from tasks import Example, Rotation
from tests.helpers import make_item
from tests.zoo.test_policy_contract import image_examples, video_examples
from zoo import GRPOStrategy, HFVLMPolicy

STRUCTURE = {
    "tiny:idefics3": ["<image>", "<fake_token_around_image>", "<global-img>", "<row_1_col_1>", "<row_6_col_6>"],
    "tiny:gemma3": ["<start_of_image>", "<image_soft_token>", "<end_of_image>"],
    "tiny:llava_onevision": ["<image>", "<video>"],
}

MISMATCH = {
    "tiny:idefics3": ("image_seq_len", lambda n: n - 1),
    "tiny:gemma3": ("full_image_sequence", lambda text: text.replace("<image_soft_token>", "", 1)),
    "tiny:llava_onevision": ("num_image_tokens", lambda n: 9),
}


@pytest.fixture(scope="module", params=HFVLMPolicy.tiny_checkpoints)
def policy(request):
    module = HFVLMPolicy(request.param)
    module.configure_model()
    return module


def test_image_structure_tokens_are_banned_but_the_turn_end_is_not(policy):
    ids = policy.tokenizer.convert_tokens_to_ids(STRUCTURE[policy.pretrained])
    assert policy.tokenizer.unk_token_id not in ids and set(ids) <= set(policy.banned_ids)
    assert policy.model.generation_config.eos_token_id in policy.eos_ids


def test_placeholder_count_mismatch_is_a_clear_error(policy, monkeypatch):
    policy.encode(image_examples())  # consistent: no error
    name, change = MISMATCH[policy.pretrained]  # a processor that expands other counts than the model fills
    monkeypatch.setattr(policy.processor, name, change(getattr(policy.processor, name)))
    token = policy.tokenizer.convert_ids_to_tokens(policy.model.config.image_token_id)
    with pytest.raises(ValueError, match=f"{token} tokens but the image inputs need"):
        policy.encode(image_examples())


def test_module_groups_partition_the_parameters(policy):
    groups = {
        name: {id(p) for m in modules for p in m.parameters()} for name, modules in policy.module_groups().items()
    }
    assert sorted(groups) == ["aligner", "llm", "vision"] and all(groups.values())
    assert sum(map(len, groups.values())) == len({id(p) for p in policy.model.parameters()})  # disjoint, complete
    assert set().union(*groups.values()) == {id(p) for p in policy.model.parameters()}


def test_text_only_rows_drop_the_padded_pixels():
    policy = HFVLMPolicy("tiny:idefics3", processor_kwargs={"size": {"longest_edge": 32}})
    policy.configure_model()
    batch = policy.encode(image_examples())
    assert batch.tensors["pixel_values"].shape[:2] == (3, 2)  # [B, crops]: one crop per image, 2 at most
    assert batch.items == {"image": [1, 2, 0]}
    assert "pixel_values" not in batch.select([2, 2]) and batch.select([0, 2])["pixel_values"].shape[0] == 2


def test_videos_are_a_clear_error(policy):
    with pytest.raises(ValueError, match=r"takes \['image', 'text'\].*has \['video'\]"):
        policy.encode(video_examples()[:1])


def test_qwen_checkpoints_point_to_qwen_policy():
    with pytest.raises(ValueError, match="QwenVLPolicy"):
        HFVLMPolicy("tiny:qwen2_vl").configure_model()


def test_save_pretrained_round_trip_gives_the_same_logits(policy, tmp_path):
    policy.save_pretrained(tmp_path)
    reloaded = HFVLMPolicy(str(tmp_path))
    reloaded.configure_model()
    rollout = policy.sample(image_examples(), 2, max_new_tokens=4, seed=0)
    rows = torch.arange(rollout.size)
    with torch.no_grad():
        first, second = policy.token_log_probs(rollout, rows)[0], reloaded.token_log_probs(rollout, rows)[0]
    assert torch.equal(first, second)
    assert (
        reloaded.encode(image_examples())
        .tensors["input_ids"]
        .equal(policy.encode(image_examples()).tensors["input_ids"])
    )


@pytest.mark.parametrize("checkpoint", HFVLMPolicy.tiny_checkpoints)
def test_grpo_steps_on_rotation(checkpoint):
    torch.manual_seed(0)
    policy = HFVLMPolicy(checkpoint, optimizer=partial(torch.optim.AdamW, lr=1e-3))
    task = Rotation(labels="letters", answer_format="bare")
    data = PretextDataModule(SyntheticScenes(size=16, image_size=48), task, batch_size=2, val_size=2, epoch_size=4)
    trainer = Trainer(
        max_steps=2,
        strategy=GRPOStrategy(num_generations=2, max_new_tokens=3, entropy_coef=0.01),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[GRPOMetrics(summary=False)],
        num_sanity_val_steps=0,
        val_check_interval=2,
        check_val_every_n_epoch=None,
    )
    trainer.fit(policy, data)
    logged = trainer.callback_metrics
    assert trainer.global_step == 2 and torch.isfinite(logged["train/grpo/loss"])
    assert "train/reward/rotation/accuracy" in logged and "val/rotation/accuracy" in logged


@pytest.mark.parametrize("aspect", ["anyres_max_9", "anyres_max_1"])  # max_1 shrinks the unpadded grid
def test_llava_onevision_anyres_counts_match_the_model(aspect, monkeypatch):
    policy = HFVLMPolicy("tiny:llava_onevision")
    policy.configure_model()
    monkeypatch.setattr(policy.model.config, "vision_aspect_ratio", aspect)
    monkeypatch.setattr(policy.processor, "vision_aspect_ratio", aspect)
    image = make_item("image", 0)
    examples = [
        Example(
            [
                {
                    "role": "user",
                    "content": [{"type": "image", "image": image.resize(size)}, {"type": "text", "text": "?"}],
                }
            ],
            "x",
            f"{size}",
        )
        for size in [(60, 40), (20, 90), (90, 20), (64, 64), (33, 31)]
    ]
    batch = policy.encode(examples)  # the count check agrees with the processor
    with torch.no_grad():  # and the model's own feature count agrees with both
        policy.model(**batch.select([4, 0, 2]))
