"""Cache of frozen features φ(x) (φ is frozen in FedFT-EDS, so φ(x) is computed once).

φ never changes during a run, so a client computes φ(x) for its data once, the first round it takes part, and
later rounds run only θ. Two tiers, both bounded:

- memory: a per-process LRU of host tensors capped at ``feature-cache-mb`` (a Ray actor in simulation serves many
  rounds and clients). With a folder set, an entry is the folder's file memory-mapped, not a copy in the process's
  own memory: its pages are the page cache's, shared by every process that maps the file. Ray gives a client to
  whichever actor is free, so over the rounds each actor meets most clients; with private copies each actor came to
  hold the features of most of the population (the 10-client scale benchmark's actors peaked at 1.6 or 2.4 GiB,
  depending on how the clients fell), with mapped files they hold them once between them;
- disk (``feature-cache-dir``): a deployed SuperNode starts a new ClientApp process for every message, so only
  files outlive a round there. A file that fits the memory cap is mapped into it; a larger one is streamed a chunk
  at a time each round (``OnDisk``), so a small node's memory holds one chunk, never the whole set.

Features too large for the memory cap with no folder set are recomputed every round; a log line says which.
Entries are keyed by the client and a fingerprint of φ, so a different φ (another run, another pretraining) never
reuses stale features.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from logging import INFO, WARNING
from pathlib import Path

import numpy as np
import torch
from flwr.common.logger import log

from client_app.feature_sources import Computed, Features, InMemory, OnDisk, write_features


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


def _mapped(path: Path) -> torch.Tensor:
    """The features in ``path`` (a file ``write_features`` wrote), memory-mapped. Copy-on-write: the tensor is
    writable as torch expects, and since nothing writes to it, no page becomes private to this process."""
    on_disk = OnDisk(path)  # checks the header
    array = np.load(path, mmap_mode="c")
    if array.shape != on_disk.shape:
        raise ValueError(f"{path} does not hold the features its header describes")
    return torch.from_numpy(array)


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
        return self.directory / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".npy")

    def get(self, key: Hashable) -> Features | None:
        """The cached features of ``key``: in memory, or from its file (mapped if it fits the cap, else streamed)."""
        features = self._entries.get(key)
        if features is not None:
            self._entries.move_to_end(key)
            return InMemory(features)
        path = self._file(key)
        if path is None or not path.is_file():
            return None
        try:
            on_disk = OnDisk(path)
            if on_disk.nbytes > self.max_bytes:
                return on_disk
            loaded = _mapped(path)
        except (OSError, ValueError) as err:
            log(WARNING, "feature cache: unreadable %s (%s); recomputing", path, err)
            return None
        self._remember(key, loaded)
        return InMemory(loaded)

    def put(self, key: Hashable, features: torch.Tensor) -> torch.Tensor:
        """Store ``features`` on disk (if a folder is set) and in memory (if they fit the cap: the file mapped, else
        ``features`` themselves); return what the memory tier holds (``features`` when it holds nothing)."""
        path = self._file(key)
        if path is not None:
            write_features(path, [features], len(features), tuple(features.shape[1:]), features.dtype)
        if _nbytes(features) > self.max_bytes:
            return features
        kept = _mapped(path) if path is not None else features
        self._remember(key, kept)
        return kept

    def build(self, key: Hashable, source: Computed, batch_size: int, dtype: torch.dtype) -> Features | None:
        """Compute ``source`` once and keep it: in memory if it fits the cap (and on disk when a folder is set),
        else streamed into a file chunk by chunk. None (with a log line) when it fits neither: recompute."""
        row_shape = source.row_shape()
        row_bytes = int(torch.empty(row_shape, dtype=dtype).numel()) * torch.empty(0, dtype=dtype).element_size()
        size = len(source) * row_bytes
        path = self._file(key)
        if size > self.max_bytes:
            where = "streaming them from disk" if path else "recomputing the frozen part"
            log(
                WARNING,
                "feature cache: %.0f MB of features exceed the %.0f MB memory cap (feature-cache-mb); %s every round",
                size / 2**20,
                self.max_bytes / 2**20,
                where,
            )
            if path is None:
                return None
            return write_features(path, source.chunks(batch_size), len(source), row_shape, dtype)
        features = torch.empty((len(source), *row_shape), dtype=dtype)
        start = 0
        for chunk in source.chunks(batch_size):
            features[start : start + len(chunk)] = chunk.to("cpu", dtype)
            start += len(chunk)
        return InMemory(self.put(key, features))

    def _remember(self, key: Hashable, features: torch.Tensor) -> None:
        size = _nbytes(features)
        self._entries.pop(key, None)
        while self._entries and self.used_bytes + size > self.max_bytes:
            evicted, _ = self._entries.popitem(last=False)
            log(INFO, "feature cache: evicted %s to stay under %.0f MB", evicted, self.max_bytes / 2**20)
        self._entries[key] = features


#: The cache of this process (a Ray worker serving several simulated clients, or one ClientApp process).
PROCESS_CACHE = FeatureCache(max_bytes=2 * 2**30)
