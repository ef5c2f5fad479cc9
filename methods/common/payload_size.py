"""Bytes a method puts on the wire: model states and metadata (thesis Tables 5.10 and 6.x).

The thesis counts metadata as float32 values only (e.g. FedKAD CIFAR-10: 50,000 × 64·8·8 × 4 B = 819.2 MB);
labels are left out unless ``label_bytes`` is given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import torch

#: float32, the thesis's unit for metadata sizes.
FLOAT32_BYTES = 4


def state_bytes(state: Mapping[str, torch.Tensor], keys: Iterable[str] | None = None) -> int:
    """Σ numel × element size over ``keys`` of a state dict (every key when None)."""
    chosen = list(state) if keys is None else list(keys)
    return sum(state[key].numel() * state[key].element_size() for key in chosen)


def feature_map_bytes(
    count: int, map_shape: Sequence[int], *, value_bytes: int = FLOAT32_BYTES, label_bytes: int = 0
) -> int:
    """Bytes of ``count`` feature maps of ``map_shape`` (plus ``label_bytes`` per map for its label)."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return count * (math.prod(map_shape) * value_bytes + label_bytes)
