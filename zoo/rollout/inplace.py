"""A dynamic KV cache written in place: one buffer per layer for a whole rollout, allocated once,
instead of a concatenation of every layer's keys and values at every token."""

from __future__ import annotations

from torch import Tensor
from transformers.cache_utils import DynamicLayer


class InPlaceLayer(DynamicLayer):
    """A dynamic cache layer whose keys and values live in a buffer allocated once for the whole
    rollout: each token is written in place instead of concatenated, and the layer hands out the
    filled part (a view), so attention reads exactly the keys and values a `DynamicLayer` would."""

    @classmethod
    def from_layer(cls, layer: DynamicLayer, capacity: int) -> InPlaceLayer:
        """``layer``'s entries copied into a buffer of ``capacity`` positions."""
        new = cls()
        new.__dict__.update(layer.__dict__)
        length = layer.get_seq_length()
        for name in ("keys", "values"):
            filled = getattr(layer, name)  # [N, H, length, D]
            buffer = filled.new_empty((*filled.shape[:2], capacity, filled.shape[-1]))
            buffer[:, :, :length] = filled
            setattr(new, f"_{name}", buffer)
            setattr(new, name, buffer[:, :, :length])
        return new

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs) -> tuple[Tensor, Tensor]:
        start, end = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
        self._keys[:, :, start:end] = key_states
        self._values[:, :, start:end] = value_states
        self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
        return self.keys, self.values


def write_in_place(cache, capacity: int) -> None:
    """Replace every plain `DynamicLayer` of ``cache`` by an `InPlaceLayer` of ``capacity``
    positions (sliding-window and static layers are left as they are)."""
    cache.layers = [
        InPlaceLayer.from_layer(layer, capacity) if type(layer) is DynamicLayer and layer.is_initialized else layer
        for layer in cache.layers
    ]
