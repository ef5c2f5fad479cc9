"""Per-node data on disk, for deployment: each SuperNode reads only its own partition (``data-path``).

A node folder holds three files:

- ``images.npy``: uint8, N x C x H x W (as the dataset's files store them, before normalisation);
- ``labels.npy``: int64, N;
- ``partition.json``: ``{"dataset", "partition-id", "num-partitions", "num-samples", "num-classes",
  "split"}``, where ``split`` records the settings the partition was cut with.

``export_partitions`` writes one such folder per partition of a run's split; ``read_node_data`` loads one
and checks it against the run's dataset, so a node holding the wrong data fails with a clear message.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from data.catalog import DATASETS
from data.federated import FederatedSplit, load_client_partition
from data.image_checks import images_problem, labels_problem
from data.image_data import ImageData

IMAGES_FILE, LABELS_FILE, PARTITION_FILE = "images.npy", "labels.npy", "partition.json"


class NodeDataError(ValueError):
    """A node's ``data-path`` is missing, unreadable or holds data of another dataset."""


def write_node_folder(
    folder: Path, data: ImageData, dataset: str, partition_id: int, num_partitions: int, split: dict
) -> Path:
    """Write one node's folder: its images, labels and partition.json (``split``: how it was cut)."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / IMAGES_FILE, data.images)
    np.save(folder / LABELS_FILE, data.labels.astype(np.int64))
    meta = {
        "dataset": dataset,
        "partition-id": partition_id,
        "num-partitions": num_partitions,
        "num-samples": len(data),
        "num-classes": DATASETS[dataset].num_classes,
        "split": split,
    }
    (folder / PARTITION_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return folder


def export_partitions(split: FederatedSplit, num_partitions: int, out: Path) -> list[Path]:
    """Write ``out/node-<i>/`` for every partition ``i``; return the folders."""
    return [
        write_node_folder(
            out / f"node-{pid}",
            load_client_partition(split, pid, num_partitions),
            split.dataset,
            pid,
            num_partitions,
            dataclasses.asdict(split),
        )
        for pid in range(num_partitions)
    ]


def read_node_data(path: Path, dataset: str) -> ImageData:
    """The images and labels in ``path``, checked against ``dataset``; NodeDataError saying what is wrong."""
    if not path.is_dir():
        raise NodeDataError(f"node config 'data-path' = '{path}' is not a folder on this node")
    try:
        meta = json.loads((path / PARTITION_FILE).read_text())
        images = np.load(path / IMAGES_FILE, allow_pickle=False)
        labels = np.load(path / LABELS_FILE, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise NodeDataError(f"node config 'data-path' = '{path}' cannot be read: {err}") from None
    info = DATASETS[dataset]
    if not isinstance(meta, dict):
        raise NodeDataError(f"data-path '{path}': {PARTITION_FILE} holds a {type(meta).__name__}, not an object")
    if meta.get("dataset") != dataset:
        raise NodeDataError(f"data-path '{path}' holds {meta.get('dataset')!r} data but the run uses {dataset!r}")
    problem = images_problem(images, info) or labels_problem(labels, len(images), info)
    if problem:
        raise NodeDataError(f"data-path '{path}': {problem}")
    if meta.get("num-samples") != len(images):
        raise NodeDataError(
            f"data-path '{path}': {PARTITION_FILE} says {meta.get('num-samples')!r} samples but "
            f"{IMAGES_FILE} holds {len(images)}"
        )
    return ImageData(images, labels.astype(np.int64))
