"""zoo: multimodal policies as LightningModules, GRPO and SFT as Lightning strategies, offline tiny models."""

from zoo.batch import MediaSpec, PromptBatch
from zoo.encoder_lm import EncoderLMPolicy
from zoo.grpo import GRPODDPStrategy, GRPOFSDPStrategy, GRPOMixin, GRPOStrategy, Rollout
from zoo.hf_vlm import HFVLMPolicy
from zoo.point_lm import PointLMPolicy
from zoo.policy import PolicyModule
from zoo.qwen_audio import QwenAudioPolicy
from zoo.qwen_omni import QwenOmniPolicy
from zoo.qwen_vl import QwenVLPolicy
from zoo.sft import SFTDDPStrategy, SFTFSDPStrategy, SFTMixin, SFTStrategy

__all__ = ["EncoderLMPolicy", "GRPODDPStrategy", "GRPOFSDPStrategy", "GRPOMixin", "GRPOStrategy", "HFVLMPolicy",
           "MediaSpec", "PointLMPolicy", "PolicyModule", "PromptBatch", "QwenAudioPolicy", "QwenOmniPolicy",
           "QwenVLPolicy", "Rollout", "SFTDDPStrategy", "SFTFSDPStrategy", "SFTMixin", "SFTStrategy"]
