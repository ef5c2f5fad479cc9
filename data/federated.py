"""What each side of a run gets from a dataset: a client its own partition, the server its held-out
public split and the test set. Every node derives the same split from the same settings and seed."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from data.catalog import DATASETS, DatasetInfo
from data.image_data import ImageData
from data.loading import load_dataset
from data.partitioning import partition_indices, split_public


@dataclass(frozen=True)
class FederatedSplit:
    """The settings that fix how a dataset is divided between the server and the clients."""

    dataset: str
    data_dir: str
    partitioner: str
    dirichlet_alpha: float
    min_partition_size: int
    self_balancing: bool
    classes_per_client: int
    public_fraction: float
    seed: int

    @property
    def info(self) -> DatasetInfo:
        return DATASETS[self.dataset]


@functools.lru_cache(maxsize=4)
def _client_pool_and_partitions(split: FederatedSplit, num_partitions: int) -> tuple[np.ndarray, list[np.ndarray]]:
    train = load_dataset(split.dataset, split.data_dir).train
    pool, _ = split_public(train.labels, split.public_fraction, split.seed)
    parts = partition_indices(
        train.labels[pool],
        num_partitions,
        split.partitioner,
        alpha=split.dirichlet_alpha,
        min_size=split.min_partition_size,
        self_balancing=split.self_balancing,
        classes_per_client=split.classes_per_client,
        seed=split.seed,
    )
    return pool, parts


def partition_sizes(split: FederatedSplit, num_partitions: int) -> list[int]:
    """Number of training samples of every partition (checks that the split can be made)."""
    return [len(p) for p in _client_pool_and_partitions(split, num_partitions)[1]]


def _client_indices(split: FederatedSplit, partition_id: int, num_partitions: int) -> np.ndarray:
    """Positions in the training set of one client's samples."""
    if not 0 <= partition_id < num_partitions:
        raise ValueError(f"partition-id {partition_id} is outside [0, {num_partitions})")
    pool, parts = _client_pool_and_partitions(split, num_partitions)
    return pool[parts[partition_id]]


def load_client_partition(split: FederatedSplit, partition_id: int, num_partitions: int) -> ImageData:
    """The training samples of one client."""
    train = load_dataset(split.dataset, split.data_dir).train
    return train.subset(_client_indices(split, partition_id, num_partitions))


def client_partition_labels(split: FederatedSplit, partition_id: int, num_partitions: int) -> np.ndarray:
    """The labels of one client's training samples (no images are copied or transformed)."""
    train = load_dataset(split.dataset, split.data_dir).train
    return train.labels[_client_indices(split, partition_id, num_partitions)]


def load_public_split(split: FederatedSplit) -> ImageData:
    """The server's held-out share of the training set (empty when ``public-fraction`` is 0)."""
    train = load_dataset(split.dataset, split.data_dir).train
    return train.subset(split_public(train.labels, split.public_fraction, split.seed)[1])


def load_test_set(split: FederatedSplit) -> ImageData:
    """The official test set, for central evaluation."""
    return load_dataset(split.dataset, split.data_dir).test
