"""What each side of a run gets from a dataset: a client its own partition, the server its held-out
public split and the test set. Every node derives the same split from the same settings and seed.

The split over all clients is a table (``data.partitioning.partition_table``) from which a client takes only its own
slice. With a ``cache`` folder (``data-cache-dir``) the table and the decoded dataset are computed once per machine
and memory-mapped by every process that needs them (``data/array_cache.py``); without one, each process computes
them in its own memory.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.array_cache import cached_arrays
from data.catalog import DatasetInfo
from data.image_data import ImageData
from data.loading import dataset_info, dataset_source, shared_dataset
from data.own_data import DEFAULT_COLUMNS, Columns
from data.partitioning import partition_table, split_public

#: Bumped when how a split is computed changes (its cached tables are then recomputed).
SPLIT_VERSION = 1


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
    columns: Columns = DEFAULT_COLUMNS  # a saved Hugging Face dataset's image and label columns

    @property
    def info(self) -> DatasetInfo:
        return dataset_info(self.dataset, self.data_dir, self.columns)


@dataclass(frozen=True)
class SplitTable:
    """The clients' share of the training set (``pool``, positions in it) and every client's slice of the pool."""

    pool: np.ndarray
    positions: np.ndarray
    offsets: np.ndarray

    def client_indices(self, partition_id: int) -> np.ndarray:
        """Positions in the training set of one client's samples."""
        return self.pool[self.positions[self.offsets[partition_id] : self.offsets[partition_id + 1]]]

    def sizes(self) -> list[int]:
        return np.diff(self.offsets).tolist()


def _train(split: FederatedSplit, cache: Path | None) -> ImageData:
    return shared_dataset(split.dataset, split.data_dir, cache, split.columns).train


@functools.lru_cache(maxsize=4)
def split_table(split: FederatedSplit, num_partitions: int, cache: Path | None = None) -> SplitTable:
    """The split of the training set over ``num_partitions`` clients (checks that it can be made)."""

    def compute() -> dict[str, np.ndarray]:
        labels = np.asarray(_train(split, cache).labels)
        pool, _ = split_public(labels, split.public_fraction, split.seed)
        positions, offsets = partition_table(
            labels[pool],
            num_partitions,
            split.partitioner,
            alpha=split.dirichlet_alpha,
            min_size=split.min_partition_size,
            self_balancing=split.self_balancing,
            classes_per_client=split.classes_per_client,
            seed=split.seed,
        )
        return {"pool": pool, "positions": positions, "offsets": offsets}

    source = dataset_source(split.dataset, split.data_dir, split.columns) if cache is not None else None
    settings = {k: v for k, v in vars(split).items() if k not in ("data_dir", "columns")}  # columns: in the source
    key = {"kind": "split", "version": SPLIT_VERSION, "source": source, "split": settings, "clients": num_partitions}
    arrays = cached_arrays(cache if source is not None else None, key, compute)
    return SplitTable(arrays["pool"], arrays["positions"], arrays["offsets"])


def partition_sizes(split: FederatedSplit, num_partitions: int, cache: Path | None = None) -> list[int]:
    """Number of training samples of every partition (checks that the split can be made)."""
    return split_table(split, num_partitions, cache).sizes()


#: Populations up to this size have every partition's size in the run's log; larger ones a summary.
LISTED_SIZES = 20


def describe_sizes(sizes: list[int]) -> str:
    """The partition sizes for a log line: the list for a small population; for a large one (a line per run, not
    100,000 numbers) the smallest, median and largest, and how many partitions hold no sample."""
    if len(sizes) <= LISTED_SIZES:
        return str(sizes)
    empty = sum(size == 0 for size in sizes)
    return f"{min(sizes)} to {max(sizes)} (median {float(np.median(sizes)):g}; {empty} of {len(sizes)} empty)"


def _client_indices(split: FederatedSplit, partition_id: int, num_partitions: int, cache: Path | None) -> np.ndarray:
    """Positions in the training set of one client's samples."""
    if not 0 <= partition_id < num_partitions:
        raise ValueError(f"partition-id {partition_id} is outside [0, {num_partitions})")
    return split_table(split, num_partitions, cache).client_indices(partition_id)


def load_client_partition(
    split: FederatedSplit, partition_id: int, num_partitions: int, cache: Path | None = None
) -> ImageData:
    """The training samples of one client (a copy of just those samples)."""
    return _train(split, cache).subset(_client_indices(split, partition_id, num_partitions, cache))


def client_partition_labels(
    split: FederatedSplit, partition_id: int, num_partitions: int, cache: Path | None = None
) -> np.ndarray:
    """The labels of one client's training samples (no images are copied or transformed)."""
    return _train(split, cache).labels[_client_indices(split, partition_id, num_partitions, cache)]


def load_public_split(split: FederatedSplit, cache: Path | None = None) -> ImageData:
    """The server's held-out share of the training set (empty when ``public-fraction`` is 0)."""
    train = _train(split, cache)
    return train.subset(split_public(np.asarray(train.labels), split.public_fraction, split.seed)[1])


def load_test_set(split: FederatedSplit, cache: Path | None = None) -> ImageData:
    """The official test set, for central evaluation."""
    return shared_dataset(split.dataset, split.data_dir, cache, split.columns).test
