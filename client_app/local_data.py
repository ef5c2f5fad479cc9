"""A client's own training data, loaded on first use and kept per process as compact uint8 images.

In simulation every client cuts its partition from the shared dataset; a deployed SuperNode started with a
``data-path`` node config reads its exported partition folder instead (see ``data/node_data.py``). Images are
normalised on the device that computes with them (``LocalData.inputs``), once per round or per chunk.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from data.catalog import DatasetInfo
from data.federated import FederatedSplit, load_client_partition
from data.image_data import ImageData
from data.node_data import node_dataset_info, read_node_data
from data.own_data import DEFAULT_COLUMNS, Columns
from data.transforms import normalise


@dataclass(frozen=True)
class LocalData:
    """uint8 images (N x C x H x W, as stored), int64 labels, and how to turn the images into model inputs."""

    images: torch.Tensor
    labels: torch.Tensor
    info: DatasetInfo

    def __len__(self) -> int:
        return len(self.labels)

    def inputs(self, device: torch.device, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Normalised model inputs (float32 N x C x H x W; 32 x 32 for the catalogued datasets) of samples
        ``start:stop``, made on ``device``."""
        return normalise(self.images[start:stop].to(device), self.info)

    def rows(self, device: torch.device, indices: torch.Tensor) -> torch.Tensor:
        """Normalised model inputs of the samples at ``indices`` (a CPU index tensor), made on ``device``."""
        return normalise(self.images[indices].to(device), self.info)

    @classmethod
    def from_images(cls, data: ImageData, info: DatasetInfo) -> LocalData:
        return cls(torch.from_numpy(np.ascontiguousarray(data.images)), torch.from_numpy(data.labels), info)


@functools.lru_cache(maxsize=8)
def load_local_data(
    split: FederatedSplit, partition_id: int, num_partitions: int, cache: Path | None = None
) -> LocalData:
    """The client's partition of the shared dataset (``cache``: the machine's shared arrays, ``data-cache-dir``)."""
    return LocalData.from_images(load_client_partition(split, partition_id, num_partitions, cache), split.info)


@functools.lru_cache(maxsize=2)
def load_node_local_data(data_path: str, dataset: str, columns: Columns = DEFAULT_COLUMNS) -> LocalData:
    """The partition exported to ``data_path`` (checked against ``dataset``)."""
    folder = Path(data_path).expanduser()
    return LocalData.from_images(read_node_data(folder, dataset, columns), node_dataset_info(folder, dataset, columns))
