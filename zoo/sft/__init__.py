"""Supervised fine-tuning: pure loss math (`functional`), demonstrations as completions, and the
strategies."""

from zoo.sft.demonstrations import teacher_forced
from zoo.sft.strategy import SFTDDPStrategy, SFTFSDPStrategy, SFTMixin, SFTStrategy

__all__ = ["SFTDDPStrategy", "SFTFSDPStrategy", "SFTMixin", "SFTStrategy", "teacher_forced"]
