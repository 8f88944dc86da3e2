"""PointLM: a PointNet-style set encoder over local groups -> projector -> any Hugging Face causal
LM."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from zoo.batch import MediaSpec
from zoo.spliced import SplicedPolicy


def farthest_points(xyz: Tensor, m: int) -> Tensor:
    """Indices ``[n, m]`` of farthest-point samples of each cloud ``[n, P, 3]``, starting from the
    point farthest from the centroid (deterministic)."""
    n = xyz.shape[0]
    rows = torch.arange(n, device=xyz.device)
    chosen = torch.empty(n, m, dtype=torch.long, device=xyz.device)
    chosen[:, 0] = (xyz - xyz.mean(1, keepdim=True)).square().sum(-1).argmax(1)
    nearest = torch.full(xyz.shape[:2], float("inf"), device=xyz.device)  # [n, P]
    for i in range(1, m):
        nearest = torch.minimum(nearest, (xyz - xyz[rows, chosen[:, i - 1]][:, None]).square().sum(-1))
        chosen[:, i] = nearest.argmax(1)
    return chosen


class PointGroupEncoder(nn.Module):
    """M group tokens per cloud: farthest-point centres, their k nearest neighbours in
    centre-relative coordinates (plus RGB, zeros when absent) through a shared MLP, max-pooled, plus
    an embedding of the centre's position. Points are float ``[sum P, 6]`` with a ``[items, 1]``
    count per cloud."""

    media_keys = ("points", "point_counts")
    spec = MediaSpec(per_item=("point_counts",), flat="points", grid="point_counts")

    def __init__(self, num_tokens: int, group_size: int, width: int):
        super().__init__()
        self.num_tokens = num_tokens
        self.group_size = group_size
        self.out_dim = width
        self.config = {"num_tokens": num_tokens, "group_size": group_size, "width": width}
        self.local = nn.Sequential(nn.Linear(6, width), nn.GELU(), nn.Linear(width, width))
        self.position = nn.Sequential(nn.Linear(3, width), nn.GELU(), nn.Linear(width, width))
        self.norm = nn.LayerNorm(width)

    def prepare(self, parts: list[dict]) -> dict[str, Tensor]:
        clouds = [np.asarray(p["points"], dtype=np.float32) for p in parts]
        for cloud in clouds:
            if cloud.ndim != 2 or cloud.shape[1] not in (3, 6) or len(cloud) < self.num_tokens:
                raise ValueError(f"a point_cloud part needs [P >= {self.num_tokens}, 3 or 6] points, got {cloud.shape}")
        padded = [np.pad(c, ((0, 0), (0, 6 - c.shape[1]))) for c in clouds]  # RGB zeros for xyz-only clouds
        return {
            "points": torch.from_numpy(np.concatenate(padded)),
            "point_counts": torch.tensor([[len(c)] for c in clouds]),
        }

    def forward(self, points: Tensor, point_counts: Tensor) -> Tensor:
        counts = point_counts[:, 0].tolist()
        clouds = points.to(self.norm.weight.dtype).split(counts)
        if len(set(counts)) == 1:
            return self._encode(torch.stack(clouds))
        return torch.cat([self._encode(cloud[None]) for cloud in clouds])

    def _encode(self, clouds: Tensor) -> Tensor:
        """``[n, P, 6]`` clouds -> ``[n, M, width]`` tokens."""
        xyz = clouds[..., :3].float()
        rows = torch.arange(len(clouds), device=clouds.device)[:, None]
        with torch.no_grad():
            centre_ids = farthest_points(xyz, self.num_tokens)  # [n, M]
            centres = xyz[rows, centre_ids]  # [n, M, 3]
            k = min(self.group_size, xyz.shape[1])
            neighbours = torch.cdist(centres, xyz).topk(k, largest=False).indices  # [n, M, k]
        groups = clouds[rows[..., None], neighbours]  # [n, M, k, 6]
        local = torch.cat([groups[..., :3] - centres[:, :, None].to(groups.dtype), groups[..., 3:]], -1)
        features = self.local(local).amax(2)  # [n, M, width]
        return self.norm(features + self.position(centres.to(features.dtype)))


class PointLMPolicy(SplicedPolicy):
    """A native point-cloud policy: point clouds are encoded into ``num_tokens`` group tokens that
    are spliced into the prompt of any causal LM (LLaVA-style), e.g. ``Qwen/Qwen2.5-0.5B-Instruct``.

    Args:
        pretrained: A causal LM (hub id, directory, ``tiny:qwen2``) joined to a new encoder, or a
            directory saved by `save_pretrained` or a zoo checkpoint (its encoder settings then win
            over the arguments below).
        num_tokens: Groups (LM tokens) per point cloud; clouds need at least this many points.
        group_size: Nearest neighbours per group.
        width: Encoder feature width.
        placeholder: The token replaced by point features (added to the tokenizer when missing).
        init_seed: Seed of the new encoder and projector weights.
        **kwargs: Options common to every policy (see `PolicyModule`); ``freeze`` groups are
            ``encoder``, ``projector`` and ``llm``.
    """

    content_kinds = frozenset({"text", "point_cloud"})
    tiny_checkpoints = ("tiny:qwen2",)
    media_kind = "point_cloud"

    def __init__(
        self,
        pretrained: str,
        num_tokens: int = 16,
        group_size: int = 16,
        width: int = 64,
        placeholder: str = "<|point_pad|>",
        init_seed: int = 0,
        **kwargs,
    ):
        super().__init__(pretrained=pretrained, placeholder=placeholder, init_seed=init_seed, **kwargs)
        if min(num_tokens, group_size, width) < 1:
            raise ValueError(f"num_tokens, group_size and width must be >= 1, got {num_tokens}, {group_size}, {width}")
        self.num_tokens = num_tokens
        self.group_size = group_size
        self.width = width

    def encoder_config(self) -> dict:
        return {"num_tokens": self.num_tokens, "group_size": self.group_size, "width": self.width}

    def build_encoder(self, config: dict, load_weights: bool) -> PointGroupEncoder:
        return PointGroupEncoder(**config)
