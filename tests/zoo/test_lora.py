"""LoRA: a GRPO run trains only the adapters, and the KL reference is the base model with adapters
off."""

import random
from functools import partial

import pytest
import torch
from lightning.pytorch import Trainer

from callbacks import GRPOMetrics
from datamodules import PretextDataModule, SyntheticScenes
from tasks import Rotation
from tests.helpers import make_item
from zoo import GRPOStrategy, QwenVLPolicy

TINY = "tiny:qwen2_5_vl"


def lora_policy(**lora) -> QwenVLPolicy:
    torch.manual_seed(0)
    policy = QwenVLPolicy(TINY, optimizer=partial(torch.optim.AdamW, lr=1e-2), lora={"rank": 4} | lora)
    policy.configure_model()
    return policy


def examples():
    task = Rotation(labels="letters", answer_format="bare")
    return [task.make_example(make_item("image", i), random.Random(i)) for i in range(2)]


@pytest.fixture(scope="module")
def trained():
    """Two GRPO steps with a KL term; the policy may not load a second model."""
    policy = lora_policy()
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    policy.load = lambda path: pytest.fail("LoRA must not load a reference copy")
    data = PretextDataModule(
        SyntheticScenes(size=50), Rotation(labels="letters", answer_format="bare"), batch_size=2, val_size=0
    )
    trainer = Trainer(
        max_steps=2,
        strategy=GRPOStrategy(num_generations=4, max_new_tokens=2, beta=0.1, entropy_coef=0.1),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[GRPOMetrics(summary=False)],
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    trainer.fit(policy, data)
    return policy, before, trainer


def test_grpo_changes_only_adapter_weights_and_loads_no_reference(trained):
    policy, before, trainer = trained
    adapters = {n for n in before if ".lora_" in n}
    assert adapters and all(".language_model." in n for n in adapters)  # language model only by default
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable == adapters
    changed = {n for n, p in policy.named_parameters() if not torch.equal(before[n], p.detach())}
    assert changed == adapters
    assert "_reference" not in policy.__dict__
    assert torch.isfinite(trainer.callback_metrics["train/grpo/kl"])


def test_reference_log_probs_are_the_base_models(trained):
    policy, _, _ = trained
    base = QwenVLPolicy(TINY)
    base.configure_model()
    rollout = policy.sample(examples(), 2, max_new_tokens=4, seed=3)
    rows = torch.arange(rollout.size)
    mask = rollout.completion_mask
    with torch.no_grad():
        expected = base.token_log_probs(rollout, rows)[0]
        trained_logps = policy.token_log_probs(rollout, rows)[0]
    reference = policy.reference_log_probs(rollout, rows)
    torch.testing.assert_close(reference[mask], expected[mask], atol=1e-5, rtol=0)
    assert not torch.allclose(trained_logps[mask], expected[mask], atol=1e-3)  # the adapters did learn
    assert all(p.requires_grad for n, p in policy.named_parameters() if ".lora_" in n)  # flags restored


def test_lora_on_the_vision_tower_with_a_frozen_aligner():
    policy = lora_policy(groups=["llm", "vision"], target_modules=["qkv", "q_proj", "v_proj"])
    QwenVLPolicy(TINY, lora={"groups": ["llm"]}, freeze=["vision", "aligner"]).configure_model()  # no overlap
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    layers = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trainable}
    assert layers == {"qkv", "q_proj", "v_proj"} and all(".lora_" in n for n in trainable)
    assert any(".visual." in n for n in trainable) and not any("merger" in n for n in trainable)


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(lora={"groups": ["llm"]}, freeze=["llm"]), "both frozen and adapted"),
        (dict(lora={"groups": ["wings"]}), "wings"),
        (dict(lora={"target_modules": ["nope"]}), "matched no linear layer"),
    ],
)
def test_bad_lora_settings_are_clear_errors(options, match):
    with pytest.raises(ValueError, match=match):
        QwenVLPolicy(TINY, **options).configure_model()
