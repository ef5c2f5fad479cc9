"""The per-process feature cache: hits, LRU eviction, the cap, fingerprints."""

from __future__ import annotations

import torch

from client_app.feature_cache import FeatureCache, fingerprint


def mb(n: float) -> torch.Tensor:
    return torch.zeros(int(n * 2**20 / 4))


def test_hit_and_lru_eviction() -> None:
    cache = FeatureCache(max_bytes=3 * 2**20)
    cache.put("a", mb(1))
    cache.put("b", mb(1))
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", mb(1.5))
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert cache.used_bytes <= 3 * 2**20


def test_entry_over_the_cap_is_not_stored(caplog) -> None:
    cache = FeatureCache(max_bytes=2**20)
    assert cache.put("big", mb(2)) is False
    assert cache.get("big") is None


def test_resize_evicts() -> None:
    cache = FeatureCache(max_bytes=4 * 2**20)
    cache.put("a", mb(1))
    cache.put("b", mb(1))
    cache.resize(2**20)
    assert cache.get("a") is None and cache.get("b") is not None


def test_fingerprint_changes_with_any_value() -> None:
    state = {"w": torch.ones(3), "b": torch.zeros(2)}
    same = {"w": torch.ones(3), "b": torch.zeros(2)}
    other = {"w": torch.ones(3), "b": torch.tensor([0.0, 1e-7])}
    assert fingerprint(state) == fingerprint(same) != fingerprint(other)
