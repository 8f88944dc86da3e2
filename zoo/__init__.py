"""zoo: multimodal policies as LightningModules, GRPO as a Lightning strategy, offline tiny models."""

from zoo.batch import MediaSpec, PromptBatch
from zoo.grpo import GRPODDPStrategy, GRPOFSDPStrategy, GRPOMixin, GRPOStrategy, Rollout
from zoo.hf_vlm import HFVLMPolicy
from zoo.policy import PolicyModule
from zoo.qwen_vl import QwenVLPolicy

__all__ = ["GRPODDPStrategy", "GRPOFSDPStrategy", "GRPOMixin", "GRPOStrategy", "HFVLMPolicy", "MediaSpec",
           "PolicyModule", "PromptBatch", "QwenVLPolicy", "Rollout"]
