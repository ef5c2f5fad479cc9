"""A client's own training data as model-ready tensors, loaded on first use and kept per process."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from data.federated import FederatedSplit, load_client_partition
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
