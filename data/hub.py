"""Load a dataset from the Hugging Face hub through flwr-datasets (only with ``data-dir = "hub"``).

This needs internet access; it is never tried implicitly, so a run never downloads by surprise.
"""

from __future__ import annotations

import numpy as np

from data.image_data import DatasetSplits, ImageData

#: dataset name -> (hub repository, image column, label column)
HUB_DATASETS = {
    "fashion-mnist": ("zalando-datasets/fashion_mnist", "image", "label"),
    "mnist": ("ylecun/mnist", "image", "label"),
    "cifar10": ("uoft-cs/cifar10", "img", "label"),
    "cifar100": ("uoft-cs/cifar100", "img", "fine_label"),
    "cifar100-coarse": ("uoft-cs/cifar100", "img", "coarse_label"),
}


def _to_image_data(split, image_column: str, label_column: str) -> ImageData:
    images = np.stack([np.asarray(img, dtype=np.uint8) for img in split[image_column]])
    images = images[:, None] if images.ndim == 3 else images.transpose(0, 3, 1, 2)
    return ImageData(np.ascontiguousarray(images), np.asarray(split[label_column], dtype=np.int64))


def load_from_hub(name: str) -> DatasetSplits:
    """Download ``name`` with flwr-datasets' FederatedDataset (one IID partition = the whole split)."""
    from flwr_datasets import FederatedDataset
    from flwr_datasets.partitioner import IidPartitioner

    repo, image_column, label_column = HUB_DATASETS[name]
    fds = FederatedDataset(dataset=repo, partitioners={"train": IidPartitioner(num_partitions=1)})
    return DatasetSplits(
        _to_image_data(fds.load_split("train"), image_column, label_column),
        _to_image_data(fds.load_split("test"), image_column, label_column),
    )
