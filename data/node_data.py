"""Per-node data on disk, for deployment: each SuperNode reads only its own partition (``data-path``).

A node folder holds three files:

- ``images.npy``: uint8, N x C x H x W (as the dataset's files store them, before normalisation);
- ``labels.npy``: int64, N;
- ``partition.json``: ``{"dataset", "partition-id", "num-partitions", "num-samples", "num-classes",
  "split", "info"}``, where ``split`` records the settings the partition was cut with and ``info`` what the models
  need of the dataset (channels, image size, normalisation statistics, class names): a node holding a partition of a
  user's own data (``data/own_data.py``) has no more of it than this folder.

``export_partitions`` writes one such folder per partition of a run's split; ``read_node_data`` loads one
and checks it against the run's dataset, so a node holding the wrong data fails with a clear message.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from data.catalog import DATASETS, DatasetInfo
from data.federated import FederatedSplit, load_client_partition
from data.image_checks import images_problem, labels_problem
from data.image_data import ImageData
from data.own_data import DEFAULT_COLUMNS, Columns, is_own_dataset, remember_info

IMAGES_FILE, LABELS_FILE, PARTITION_FILE = "images.npy", "labels.npy", "partition.json"


class NodeDataError(ValueError):
    """A node's ``data-path`` is missing, unreadable or holds data of another dataset."""


def info_record(info: DatasetInfo) -> dict:
    """What partition.json keeps of a dataset's description."""
    return {
        "channels": info.channels,
        "size": list(info.image_size),
        "mean": list(info.mean),
        "std": list(info.std),
        "pad-to-32": info.pad_to_32,
        "class-names": list(info.class_names),
        "train-samples": info.train_samples,
        "test-samples": info.test_samples,
    }


def info_from_record(dataset: str, record: object, num_classes: object) -> DatasetInfo:
    """The dataset's description that ``info_record`` wrote; ValueError when it is not one."""
    if not isinstance(record, dict) or not isinstance(num_classes, int):
        raise ValueError(f"{PARTITION_FILE} describes no dataset (its 'info' and 'num-classes')")
    try:
        height, width = (int(v) for v in record["size"])
        return DatasetInfo(
            name=dataset,
            channels=int(record["channels"]),
            num_classes=num_classes,
            mean=tuple(float(v) for v in record["mean"]),
            std=tuple(float(v) for v in record["std"]),
            pad_to_32=bool(record["pad-to-32"]),
            train_samples=int(record["train-samples"]),
            test_samples=int(record["test-samples"]),
            size=(height, width),
            class_names=tuple(str(c) for c in record["class-names"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{PARTITION_FILE}'s 'info' is incomplete ({type(err).__name__}: {err})") from None


def write_node_folder(
    folder: Path,
    data: ImageData,
    dataset: str,
    partition_id: int,
    num_partitions: int,
    split: dict,
    info: DatasetInfo | None = None,
) -> Path:
    """Write one node's folder: its images, labels and partition.json (``split``: how it was cut; ``info``: what
    describes ``dataset``, the catalogue's entry when not given)."""
    info = info or DATASETS[dataset]
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / IMAGES_FILE, data.images)
    np.save(folder / LABELS_FILE, data.labels.astype(np.int64))
    meta = {
        "dataset": dataset,
        "partition-id": partition_id,
        "num-partitions": num_partitions,
        "num-samples": len(data),
        "num-classes": info.num_classes,
        "split": split,
        "info": info_record(info),
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
            split.info,
        )
        for pid in range(num_partitions)
    ]


def _partition_record(path: Path, dataset: str) -> dict:
    if not path.is_dir():
        raise NodeDataError(f"node config 'data-path' = '{path}' is not a folder on this node")
    try:
        meta = json.loads((path / PARTITION_FILE).read_text())
    except (OSError, ValueError) as err:
        raise NodeDataError(f"node config 'data-path' = '{path}' cannot be read: {err}") from None
    if not isinstance(meta, dict):
        raise NodeDataError(f"data-path '{path}': {PARTITION_FILE} holds a {type(meta).__name__}, not an object")
    if meta.get("dataset") != dataset:
        raise NodeDataError(f"data-path '{path}' holds {meta.get('dataset')!r} data but the run uses {dataset!r}")
    return meta


def node_dataset_info(path: Path, dataset: str, columns: Columns = DEFAULT_COLUMNS) -> DatasetInfo:
    """What the models need of ``dataset``, on a node holding its partition at ``path``: the catalogue's entry, or,
    for a user's own data, what the folder's partition.json says (then known to this process: ``dataset_info``)."""
    if not is_own_dataset(dataset):
        return DATASETS[dataset]
    meta = _partition_record(path, dataset)
    try:
        info = info_from_record(dataset, meta.get("info"), meta.get("num-classes"))
    except ValueError as err:
        raise NodeDataError(f"data-path '{path}': {err}") from None
    remember_info(dataset, columns, info)
    return info


def read_node_data(path: Path, dataset: str, columns: Columns = DEFAULT_COLUMNS) -> ImageData:
    """The images and labels in ``path``, checked against ``dataset``; NodeDataError saying what is wrong."""
    meta = _partition_record(path, dataset)
    try:
        images = np.load(path / IMAGES_FILE, allow_pickle=False)
        labels = np.load(path / LABELS_FILE, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise NodeDataError(f"node config 'data-path' = '{path}' cannot be read: {err}") from None
    info = node_dataset_info(path, dataset, columns)
    problem = images_problem(images, info) or labels_problem(labels, len(images), info)
    if problem:
        raise NodeDataError(f"data-path '{path}': {problem}")
    if meta.get("num-samples") != len(images):
        raise NodeDataError(
            f"data-path '{path}': {PARTITION_FILE} says {meta.get('num-samples')!r} samples but "
            f"{IMAGES_FILE} holds {len(images)}"
        )
    return ImageData(images, labels.astype(np.int64))
