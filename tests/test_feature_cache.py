"""The feature cache: hits, LRU eviction, the memory cap, the disk tier, fingerprints."""

from __future__ import annotations

from pathlib import Path

import torch

from client_app.feature_cache import FeatureCache, fingerprint


def mb(n: float, value: float = 0.0) -> torch.Tensor:
    return torch.full((int(n * 2**20 / 4),), value)


def test_hit_and_lru_eviction() -> None:
    cache = FeatureCache(max_bytes=3 * 2**20)
    cache.put("a", mb(1))
    cache.put("b", mb(1))
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", mb(1.5))
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert cache.used_bytes <= 3 * 2**20


def test_entry_over_the_cap_is_not_kept_in_memory(caplog) -> None:
    cache = FeatureCache(max_bytes=2**20)
    cache.put("big", mb(2))
    assert cache.get("big") is None
    assert "exceed the 1 MB memory cap (feature-cache-mb); recomputing the frozen part every round" in caplog.text


def test_configure_evicts() -> None:
    cache = FeatureCache(max_bytes=4 * 2**20)
    cache.put("a", mb(1))
    cache.put("b", mb(1))
    cache.configure(2**20, None)
    assert cache.get("a") is None and cache.get("b") is not None


def test_disk_tier_outlives_the_process(tmp_path: Path) -> None:
    FeatureCache(2**30, tmp_path).put(("client", 3), mb(1, 7.0))
    fresh = FeatureCache(2**30, tmp_path)  # a new process: empty memory, same folder
    features = fresh.get(("client", 3))
    assert features is not None and torch.equal(features, mb(1, 7.0))
    assert fresh.get(("client", 4)) is None
    assert len(list(tmp_path.glob("*.pt"))) == 1


def test_over_the_cap_is_read_from_disk_every_round(tmp_path: Path) -> None:
    cache = FeatureCache(2**20, tmp_path)
    cache.put("big", mb(2, 1.0))
    assert cache.used_bytes == 0 and torch.equal(cache.get("big"), mb(2, 1.0))


def test_unreadable_file_means_recompute(tmp_path: Path) -> None:
    cache = FeatureCache(2**30, tmp_path)
    cache.put("k", mb(1))
    next(tmp_path.glob("*.pt")).write_bytes(b"garbage")
    assert FeatureCache(2**30, tmp_path).get("k") is None


def test_fingerprint_changes_with_any_value() -> None:
    state = {"w": torch.ones(3), "b": torch.zeros(2)}
    same = {"w": torch.ones(3), "b": torch.zeros(2)}
    other = {"w": torch.ones(3), "b": torch.tensor([0.0, 1e-7])}
    assert fingerprint(state) == fingerprint(same) != fingerprint(other)
