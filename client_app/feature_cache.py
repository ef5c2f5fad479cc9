"""Per-process cache of frozen features φ(x) (SPEC §4 with the frozen-feature cache of the issue).

φ never changes during a run, so a client computes φ(x) for its data once, the first round it takes
part, and later rounds run only θ. Entries are keyed by client and by a fingerprint of φ, so a different
φ (a new run, another pretraining) can never reuse stale features. A byte cap bounds memory: the least
recently used entries are evicted, and an entry larger than the cap is not stored (the client then
recomputes φ(x) every round).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from logging import INFO, WARNING

import torch
from flwr.common.logger import log


def fingerprint(state: Mapping[str, torch.Tensor]) -> str:
    """A digest of tensors' names, shapes, dtypes and values."""
    digest = hashlib.sha1()
    for key, tensor in state.items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{key}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.numpy().tobytes())
    return digest.hexdigest()


class FeatureCache:
    """LRU cache of feature tensors with a total byte cap."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, torch.Tensor] = OrderedDict()

    @property
    def used_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._entries.values())

    def get(self, key: Hashable) -> torch.Tensor | None:
        features = self._entries.get(key)
        if features is not None:
            self._entries.move_to_end(key)
        return features

    def put(self, key: Hashable, features: torch.Tensor) -> bool:
        """Store ``features``; return False (and log) when they alone exceed the cap."""
        size = features.numel() * features.element_size()
        if size > self.max_bytes:
            log(
                WARNING,
                "feature cache: %.0f MB of features exceed the %.0f MB cap (feature-cache-mb); "
                "recomputing the frozen part every round",
                size / 2**20,
                self.max_bytes / 2**20,
            )
            return False
        self._entries.pop(key, None)
        while self._entries and self.used_bytes + size > self.max_bytes:
            evicted, _ = self._entries.popitem(last=False)
            log(INFO, "feature cache: evicted %s to stay under %.0f MB", evicted, self.max_bytes / 2**20)
        self._entries[key] = features
        return True

    def resize(self, max_bytes: int) -> None:
        """Change the cap (the run config sets it), evicting as needed."""
        self.max_bytes = max_bytes
        while self._entries and self.used_bytes > max_bytes:
            self._entries.popitem(last=False)


#: The cache of this process (a SuperNode, or a Ray worker serving several simulated clients).
PROCESS_CACHE = FeatureCache(max_bytes=2 * 2**30)
