"""EncoderLM: any timm vision backbone -> projector -> any Hugging Face causal LM, LLaVA-style."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tasks.extras import require
from zoo.batch import MediaSpec
from zoo.spliced import SplicedPolicy

PURPOSE = "EncoderLMPolicy builds its vision backbone with timm"


def _create(backbone: str, pretrained: bool, image_size: int | None, kwargs: dict) -> nn.Module:
    """A headless timm model; models with a fixed input size (ViTs, Swin, ...) are built for
    ``image_size``, the others (CNNs) take any size as they are."""
    timm = require("timm", "timm", PURPOSE)

    if image_size:
        try:
            return timm.create_model(backbone, pretrained=pretrained, num_classes=0, img_size=image_size, **kwargs)
        except TypeError:  # the model's constructor has no img_size
            pass
    return timm.create_model(backbone, pretrained=pretrained, num_classes=0, **kwargs)


class TimmEncoder(nn.Module):
    """The patch tokens ``[items, M, D]`` of a timm backbone (prefix tokens such as CLS dropped; a
    CNN's final feature map flattened), on images preprocessed with the backbone's own data
    config."""

    media_keys = ("pixel_values",)
    spec = MediaSpec(per_item=("pixel_values",))

    def __init__(self, backbone: str, timm_pretrained: bool, image_size: int | None, backbone_kwargs: dict):
        timm_data = require("timm.data", "timm", PURPOSE)
        super().__init__()
        self.config = {
            "backbone": backbone,
            "timm_pretrained": timm_pretrained,
            "image_size": image_size,
            "backbone_kwargs": backbone_kwargs,
        }
        self.backbone = _create(backbone, timm_pretrained, image_size, backbone_kwargs)
        data = timm_data.resolve_data_config(
            {"input_size": (3, image_size, image_size)} if image_size else {}, model=self.backbone
        )
        self.transform = timm_data.create_transform(**data, is_training=False)
        self.prefix = getattr(self.backbone, "num_prefix_tokens", 0)
        with torch.no_grad():
            tokens = self(torch.zeros(1, *data["input_size"]))
        self.num_tokens = tokens.shape[1]
        self.out_dim = tokens.shape[2]

    def prepare(self, parts: list[dict]) -> dict[str, Tensor]:
        return {"pixel_values": torch.stack([self.transform(p["image"].convert("RGB")) for p in parts])}

    def forward(self, pixel_values: Tensor) -> Tensor:
        features = self.backbone.forward_features(pixel_values.to(next(self.parameters()).dtype))
        if features.ndim == 4:  # CNN: [n, D, h, w] -> [n, h * w, D]
            return features.flatten(2).transpose(1, 2)
        return features[:, self.prefix :]  # ViT: [n, prefix + M, D] -> [n, M, D]


class EncoderLMPolicy(SplicedPolicy):
    """A vision-language policy built from parts: a timm backbone's patch tokens, an MLP projector
    and any causal LM (LLaVA recipe). Images go through the backbone's own preprocessing (timm data
    config). Needs timm: ``pip install "zoo[timm]"``.

    Args:
        pretrained: A causal LM (hub id, directory, ``tiny:qwen2``) joined to a new backbone and
            projector, or a directory saved by `save_pretrained` or a zoo checkpoint (its encoder
            settings then win over the arguments below).
        backbone: A timm model name, e.g. ``vit_base_patch16_siglip_224`` or ``convnext_tiny``. The
            default is timm's 0.2M-parameter test ConvNeXt (25 tokens per image), for tests and CPU
            demos only.
        timm_pretrained: Load the backbone's pretrained timm weights (needs them downloaded or
            cached).
        image_size: Input side in pixels; None keeps the backbone's default. ViTs are rebuilt for
            it.
        backbone_kwargs: Extra ``timm.create_model`` arguments (e.g. ``{drop_path_rate: 0.1}``).
        placeholder: The token replaced by image features (added to the tokenizer when missing).
        init_seed: Seed of the new backbone (when not pretrained) and projector weights.
        **kwargs: Options common to every policy (see `PolicyModule`); ``freeze`` groups are
            ``vision``, ``projector`` and ``llm``.
    """

    content_kinds = frozenset({"text", "image"})
    tiny_checkpoints = ("tiny:qwen2",)
    media_kind = "image"
    encoder_group = "vision"

    def __init__(
        self,
        pretrained: str,
        backbone: str = "test_convnext",
        timm_pretrained: bool = False,
        image_size: int | None = None,
        backbone_kwargs: dict | None = None,
        placeholder: str = "<|image_pad|>",
        init_seed: int = 0,
        **kwargs,
    ):
        super().__init__(pretrained=pretrained, placeholder=placeholder, init_seed=init_seed, **kwargs)
        self.backbone = backbone
        self.timm_pretrained = timm_pretrained
        self.image_size = image_size
        self.backbone_kwargs = dict(backbone_kwargs or {})

    def encoder_config(self) -> dict:
        return {
            "backbone": self.backbone,
            "timm_pretrained": self.timm_pretrained,
            "image_size": self.image_size,
            "backbone_kwargs": self.backbone_kwargs,
        }

    def build_encoder(self, config: dict, load_weights: bool) -> TimmEncoder:
        return TimmEncoder(**config | {"timm_pretrained": config["timm_pretrained"] and load_weights})
