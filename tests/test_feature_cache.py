"""The feature cache and its sources: hits, LRU eviction, the memory cap, the disk tier (mapped when it fits the
cap, streamed a chunk at a time when it does not), fingerprints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from client_app.feature_cache import FeatureCache, fingerprint
from client_app.feature_sources import Computed, InMemory, OnDisk, write_features
from client_app.local_data import LocalData
from data.catalog import DATASETS
from models import LeNet5


def mb(n: float, value: float = 0.0) -> torch.Tensor:
    return torch.full((int(n * 2**20 / 16), 4), value)  # rows of 4 float32 values


def whole(features) -> torch.Tensor:
    return torch.cat(list(features.chunks(1000)))


def test_hit_and_lru_eviction() -> None:
    cache = FeatureCache(max_bytes=3 * 2**20)
    cache.put("a", mb(1))
    cache.put("b", mb(1))
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", mb(1.5))
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert cache.used_bytes <= 3 * 2**20


def test_an_entry_over_the_cap_is_not_kept_in_memory() -> None:
    cache = FeatureCache(max_bytes=2**20)
    cache.put("big", mb(2))
    assert cache.get("big") is None and cache.used_bytes == 0


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
    assert isinstance(features, InMemory) and torch.equal(features.tensor, mb(1, 7.0))
    assert fresh.get(("client", 4)) is None
    assert len(list(tmp_path.glob("*.npy"))) == 1


def test_over_the_cap_is_streamed_from_disk_in_chunks_and_rows(tmp_path: Path) -> None:
    values = torch.arange(2 * 2**20 // 4, dtype=torch.float32).view(-1, 4)  # 2 MB
    cache = FeatureCache(2**20, tmp_path)
    cache.put("big", values)
    features = cache.get("big")
    assert cache.used_bytes == 0 and isinstance(features, OnDisk) and len(features) == len(values)
    chunks = list(features.chunks(1000))
    assert [len(c) for c in chunks[:2]] == [1000, 1000] and torch.equal(torch.cat(chunks), values)
    indices = torch.tensor([5, 100_000, 3, 5])
    assert torch.equal(features.rows(indices), values[indices])  # in the asked order, repeats included


def test_half_precision_features_round_trip_through_the_file(tmp_path: Path) -> None:
    values = torch.randn(10, 2, 3).half()
    on_disk = write_features(tmp_path / "f.npy", [values[:4], values[4:]], 10, (2, 3), torch.float16)
    assert on_disk.shape == (10, 2, 3) and torch.equal(whole(on_disk), values)
    with pytest.raises(ValueError, match="wrote 4 rows of features, expected 10"):
        write_features(tmp_path / "g.npy", [values[:4]], 10, (2, 3), torch.float16)
    assert not list(tmp_path.glob("g.npy*"))


def test_build_keeps_features_in_memory_or_streams_them_to_disk_or_gives_up(tmp_path: Path, caplog) -> None:
    images = torch.randint(0, 256, (30, 1, 32, 32), dtype=torch.uint8)
    data = LocalData(images, torch.zeros(30, dtype=torch.long), DATASETS["synthetic"])
    model = LeNet5(1, 4).eval()
    source = Computed(model, data, "mid", torch.device("cpu"))
    expected = whole(source).half()
    in_memory = FeatureCache(2**30).build("k", source, 7, torch.float16)
    assert isinstance(in_memory, InMemory) and torch.equal(in_memory.tensor, expected)
    small = FeatureCache(1000, tmp_path)
    streamed = small.build("k", source, 7, torch.float16)
    assert isinstance(streamed, OnDisk) and torch.equal(whole(streamed), expected) and small.used_bytes == 0
    assert "exceed the 0 MB memory cap (feature-cache-mb); streaming them from disk every round" in caplog.text
    assert FeatureCache(1000).build("k", source, 7, torch.float16) is None
    assert "recomputing the frozen part every round" in caplog.text


def test_unreadable_file_means_recompute(tmp_path: Path) -> None:
    cache = FeatureCache(2**30, tmp_path)
    cache.put("k", mb(1))
    next(tmp_path.glob("*.npy")).write_bytes(b"garbage")
    assert FeatureCache(2**30, tmp_path).get("k") is None


def test_fingerprint_changes_with_any_value() -> None:
    state = {"w": torch.ones(3), "b": torch.zeros(2)}
    same = {"w": torch.ones(3), "b": torch.zeros(2)}
    other = {"w": torch.ones(3), "b": torch.tensor([0.0, 1e-7])}
    assert fingerprint(state) == fingerprint(same) != fingerprint(other)


def _mapped_files() -> str:
    return Path("/proc/self/maps").read_text()


def test_with_a_folder_the_memory_tier_maps_the_file_instead_of_copying_it(tmp_path: Path) -> None:
    values = torch.randn(300, 2, 4).half()
    cache = FeatureCache(2**30, tmp_path)
    kept = cache.put("k", values)
    (path,) = tmp_path.glob("*.npy")
    assert str(path) in _mapped_files() and torch.equal(kept, values)
    features = cache.get("k")
    assert isinstance(features, InMemory) and features.tensor.data_ptr() == kept.data_ptr()
    other = FeatureCache(2**30, tmp_path).get("k")  # another process's cache: the same file, mapped again
    assert isinstance(other, InMemory) and torch.equal(other.tensor, values)
    assert torch.equal(features.rows(torch.tensor([4, 0, 4])), values[[4, 0, 4]])
    del kept, features, other
    cache.configure(0, tmp_path)  # evicted: the mapping goes with the entry
    assert str(path) not in _mapped_files()


def test_without_a_folder_the_memory_tier_keeps_the_tensor_itself() -> None:
    values = torch.randn(5, 3)
    cache = FeatureCache(2**30)
    assert cache.put("k", values) is values


def test_a_truncated_file_means_recompute(tmp_path: Path) -> None:
    FeatureCache(2**30, tmp_path).put("k", torch.randn(100, 8))
    (path,) = tmp_path.glob("*.npy")
    path.write_bytes(path.read_bytes()[:-64])
    assert FeatureCache(2**30, tmp_path).get("k") is None
