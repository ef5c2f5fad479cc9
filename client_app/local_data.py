"""A client's own training data as model-ready tensors, loaded on first use and kept per process.

In simulation every client cuts its partition from the shared dataset; a deployed SuperNode started with a
``data-path`` node config reads its exported partition folder instead (see ``data/node_data.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from data.catalog import DATASETS
from data.federated import FederatedSplit, load_client_partition
from data.node_data import read_node_data
from data.transforms import to_model_input


@dataclass(frozen=True)
class LocalData:
    """Normalised inputs (N x C x 32 x 32) and labels of one client."""

    inputs: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)


@functools.lru_cache(maxsize=8)
def load_local_data(split: FederatedSplit, partition_id: int, num_partitions: int) -> LocalData:
    """The client's partition, transformed once."""
    part = load_client_partition(split, partition_id, num_partitions)
    return LocalData(to_model_input(part.images, split.info), torch.from_numpy(part.labels))


@functools.lru_cache(maxsize=2)
def load_node_local_data(data_path: str, dataset: str) -> LocalData:
    """The partition exported to ``data_path`` (checked against ``dataset``), transformed once."""
    data = read_node_data(Path(data_path).expanduser(), dataset)
    return LocalData(to_model_input(data.images, DATASETS[dataset]), torch.from_numpy(data.labels))
