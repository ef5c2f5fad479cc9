"""Cache of frozen features φ(x) (SPEC §4 with the issue's frozen-feature cache).

φ never changes during a run, so a client computes φ(x) for its data once, the first round it takes
part, and later rounds run only θ. Two tiers:

- memory: a per-process LRU capped at ``feature-cache-mb`` (a Ray actor in simulation serves many rounds);
- disk (``feature-cache-dir``): a deployed SuperNode starts a new ClientApp process for every message, so
  only files outlive a round there. Files are memory-mapped when read back.

Entries are keyed by the client and a fingerprint of φ, so a different φ (another run, another
pretraining) never reuses stale features. Features larger than the memory cap are read from disk each
round, or, without a cache folder, recomputed every round; either way a log line says so.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from logging import INFO, WARNING
from pathlib import Path

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


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class FeatureCache:
    """LRU cache of feature tensors with a total byte cap, optionally backed by a folder."""

    def __init__(self, max_bytes: int, directory: Path | None = None) -> None:
        self.max_bytes = max_bytes
        self.directory = directory
        self._entries: OrderedDict[Hashable, torch.Tensor] = OrderedDict()

    @property
    def used_bytes(self) -> int:
        return sum(_nbytes(t) for t in self._entries.values())

    def configure(self, max_bytes: int, directory: Path | None) -> None:
        """Apply the run's settings (cap and folder), evicting as needed."""
        self.max_bytes, self.directory = max_bytes, directory
        while self._entries and self.used_bytes > max_bytes:
            self._entries.popitem(last=False)

    def _file(self, key: Hashable) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".pt")

    def get(self, key: Hashable) -> torch.Tensor | None:
        features = self._entries.get(key)
        if features is not None:
            self._entries.move_to_end(key)
            return features
        path = self._file(key)
        if path is None or not path.is_file():
            return None
        try:
            features = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except (OSError, RuntimeError, EOFError) as err:
            log(WARNING, "feature cache: unreadable %s (%s); recomputing", path, err)
            return None
        self._remember(key, features)
        return features

    def put(self, key: Hashable, features: torch.Tensor) -> None:
        """Store ``features`` in memory (if they fit the cap) and on disk (if a folder is set)."""
        path = self._file(key)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            torch.save(features, partial)
            partial.replace(path)
        self._remember(key, features)

    def _remember(self, key: Hashable, features: torch.Tensor) -> None:
        size = _nbytes(features)
        if size > self.max_bytes:
            where = "reading them from disk" if self.directory else "recomputing the frozen part"
            log(WARNING, "feature cache: %.0f MB of features exceed the %.0f MB memory cap (feature-cache-mb); %s every round",
                size / 2**20, self.max_bytes / 2**20, where)
            return
        self._entries.pop(key, None)
        while self._entries and self.used_bytes + size > self.max_bytes:
            evicted, _ = self._entries.popitem(last=False)
            log(INFO, "feature cache: evicted %s to stay under %.0f MB", evicted, self.max_bytes / 2**20)
        self._entries[key] = features


#: The cache of this process (a Ray worker serving several simulated clients, or one ClientApp process).
PROCESS_CACHE = FeatureCache(max_bytes=2 * 2**30)
