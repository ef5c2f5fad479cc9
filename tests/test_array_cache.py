"""Arrays shared by the processes of a machine: built once, memory-mapped, equal to what each process computed alone."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np

from data.array_cache import cached_arrays, entry_name
from data.federated import FederatedSplit, client_partition_labels, load_client_partition, partition_sizes
from data.loading import load_dataset, shared_dataset

SPLIT = FederatedSplit(
    dataset="fashion-mnist-mini",
    data_dir="",
    partitioner="dirichlet",
    dirichlet_alpha=0.1,
    min_partition_size=10,
    self_balancing=True,
    classes_per_client=2,
    public_fraction=0.2,
    seed=0,
)


def test_an_entry_is_built_once_and_read_back_memory_mapped(tmp_path: Path) -> None:
    builds: list[int] = []

    def build() -> dict[str, np.ndarray]:
        builds.append(1)
        return {"a": np.arange(5), "b": np.ones((2, 3), np.uint8)}

    first = cached_arrays(tmp_path, {"kind": "test", "n": 5}, build)
    second = cached_arrays(tmp_path, {"kind": "test", "n": 5}, build)
    other = cached_arrays(tmp_path, {"kind": "test", "n": 6}, build)
    assert builds == [1, 1]  # the second call for n = 5 read the entry
    assert isinstance(second["a"], np.memmap) and np.array_equal(second["a"], np.arange(5))
    assert np.array_equal(first["b"], other["b"]) and (tmp_path / entry_name({"kind": "test", "n": 5})).is_dir()
    second["a"][0] = 99  # copy-on-write: the file keeps its values
    assert cached_arrays(tmp_path, {"kind": "test", "n": 5}, build)["a"][0] == 0


def _partition_labels(args: tuple[Path, int]) -> list[int]:
    cache, pid = args
    return client_partition_labels(SPLIT, pid, 10, cache).tolist()


def test_processes_sharing_a_cache_see_the_partitions_each_computes_alone(tmp_path: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        shared = pool.map(_partition_labels, [(tmp_path, pid) for pid in range(10)])
    alone = [client_partition_labels(SPLIT, pid, 10).tolist() for pid in range(10)]
    assert shared == alone
    entries = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(entries) == 2  # one dataset and one split, whichever process built them
    assert partition_sizes(SPLIT, 10, tmp_path) == [len(labels) for labels in alone]
    cached, loaded = load_client_partition(SPLIT, 3, 10, tmp_path), load_client_partition(SPLIT, 3, 10)
    assert np.array_equal(cached.images, loaded.images) and np.array_equal(cached.labels, loaded.labels)


def test_a_shared_dataset_equals_the_loaded_one(tmp_path: Path) -> None:
    shared, loaded = shared_dataset("fashion-mnist-mini", "", tmp_path), load_dataset("fashion-mnist-mini")
    for a, b in ((shared.train, loaded.train), (shared.test, loaded.test)):
        assert np.array_equal(a.images, b.images) and np.array_equal(a.labels, b.labels)
    assert isinstance(shared.train.images, np.memmap) and shared.train.images.dtype == np.uint8
