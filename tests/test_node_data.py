"""Per-node data folders: export, read back, and clear errors for a wrong or missing folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from client_app.local_data import load_local_data, load_node_local_data
from data.federated import load_client_partition
from data.node_data import IMAGES_FILE, LABELS_FILE, PARTITION_FILE, NodeDataError, export_partitions, read_node_data
from run_config import federated_split
from tests.conftest import make_config

SPLIT = federated_split(make_config(dataset="synthetic", dirichlet_alpha=0.5, min_partition_size=5))


def test_exported_folders_hold_exactly_the_simulation_partitions(tmp_path: Path) -> None:
    folders = export_partitions(SPLIT, 3, tmp_path)
    assert [f.name for f in folders] == ["node-0", "node-1", "node-2"]
    for pid, folder in enumerate(folders):
        expected = load_client_partition(SPLIT, pid, 3)
        data = read_node_data(folder, "synthetic")
        np.testing.assert_array_equal(data.images, expected.images)
        np.testing.assert_array_equal(data.labels, expected.labels)
        meta = json.loads((folder / PARTITION_FILE).read_text())
        assert meta["partition-id"] == pid and meta["num-partitions"] == 3 and meta["num-samples"] == len(expected)
        assert meta["split"]["seed"] == SPLIT.seed and meta["dataset"] == "synthetic"
    torch_from_folder = load_node_local_data(str(folders[1]), "synthetic")
    torch_from_split = load_local_data(SPLIT, 1, 3)
    assert torch.equal(torch_from_folder.images, torch_from_split.images)
    assert torch.equal(torch_from_folder.labels, torch_from_split.labels)


def test_missing_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(NodeDataError, match=r"node config 'data-path' = '.*nowhere' is not a folder on this node"):
        read_node_data(tmp_path / "nowhere", "synthetic")


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    (folder / IMAGES_FILE).write_bytes(b"garbage")
    with pytest.raises(NodeDataError, match="cannot be read"):
        read_node_data(folder, "synthetic")


def test_another_dataset_is_refused(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    with pytest.raises(NodeDataError, match=r"holds 'synthetic' data but the run uses 'fashion-mnist'"):
        read_node_data(folder, "fashion-mnist")


def test_labels_outside_the_datasets_classes_are_refused(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    labels = np.load(folder / LABELS_FILE)
    labels[0] = 7  # synthetic has 4 classes
    np.save(folder / LABELS_FILE, labels)
    with pytest.raises(NodeDataError, match=r"labels span 0..7, but 'synthetic' has classes 0..3"):
        read_node_data(folder, "synthetic")


def test_images_of_the_wrong_shape_are_refused(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    images = np.load(folder / IMAGES_FILE)
    np.save(folder / IMAGES_FILE, np.repeat(images, 3, axis=1))
    with pytest.raises(NodeDataError, match=r"expected uint8 N x 1 x H x W"):
        read_node_data(folder, "synthetic")


def test_images_of_another_size_are_refused(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    images = np.load(folder / IMAGES_FILE)
    np.save(folder / IMAGES_FILE, images[:, :, :28, :28])
    with pytest.raises(NodeDataError) as err:
        read_node_data(folder, "synthetic")
    assert str(err.value) == (
        f"data-path '{folder}': images are uint8 ({len(images)}, 1, 28, 28), expected uint8 "
        "N x 1 x H x W with H x W = 32 x 32 for 'synthetic'"
    )


def test_a_sample_count_other_than_the_partition_files_is_refused(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    np.save(folder / IMAGES_FILE, np.load(folder / IMAGES_FILE)[:-1])
    np.save(folder / LABELS_FILE, np.load(folder / LABELS_FILE)[:-1])
    with pytest.raises(NodeDataError, match=r"partition.json says \d+ samples but images.npy holds \d+"):
        read_node_data(folder, "synthetic")


def test_a_partition_file_that_is_no_object_is_refused(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    (folder / PARTITION_FILE).write_text("[1, 2]")
    with pytest.raises(NodeDataError, match="partition.json holds a list, not an object"):
        read_node_data(folder, "synthetic")


def test_labels_of_another_count_are_refused(tmp_path: Path) -> None:
    (folder,) = export_partitions(SPLIT, 1, tmp_path)
    np.save(folder / LABELS_FILE, np.load(folder / LABELS_FILE)[:-1])
    with pytest.raises(NodeDataError, match=r"labels are int64 \(\d+,\), expected \d+ integers"):
        read_node_data(folder, "synthetic")
