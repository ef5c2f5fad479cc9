"""Loaders on tiny files written in the real formats, the embedded mini set, and missing data."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from data.catalog import DATASETS
from data.federated import FederatedSplit, describe_sizes, load_client_partition, load_public_split, partition_sizes
from data.file_formats import DataFormatError, read_idx, write_idx
from data.loading import DataNotFoundError, dataset_source, load_dataset, load_mini

RNG = np.random.default_rng(0)


def write_mnist_like(folder: Path, n_train: int = 40, n_test: int = 10) -> tuple[np.ndarray, np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    train_x = RNG.integers(0, 256, (n_train, 28, 28), dtype=np.uint8)
    train_y = (np.arange(n_train) % 10).astype(np.uint8)
    write_idx(folder / "train-images-idx3-ubyte.gz", train_x)
    write_idx(folder / "train-labels-idx1-ubyte.gz", train_y)
    write_idx(folder / "t10k-images-idx3-ubyte.gz", RNG.integers(0, 256, (n_test, 28, 28), dtype=np.uint8))
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", (np.arange(n_test) % 10).astype(np.uint8))
    return train_x, train_y


def write_cifar_batch(path: Path, n: int, label_key: bytes, num_labels: int, extra: dict | None = None) -> np.ndarray:
    data = RNG.integers(0, 256, (n, 3072), dtype=np.uint8)
    batch = {b"data": data, label_key: [i % num_labels for i in range(n)], **(extra or {})}
    with path.open("wb") as handle:
        pickle.dump(batch, handle)
    return data


def test_the_same_files_elsewhere_have_the_same_source_and_changed_content_another(tmp_path: Path) -> None:
    write_mnist_like(tmp_path / "first" / "fashion-mnist")
    shutil.copytree(tmp_path / "first", tmp_path / "second")
    for path in (tmp_path / "second" / "fashion-mnist").iterdir():
        os.utime(path, ns=(0, 0))  # another clone: other paths, other modification times, the same bytes
    first = dataset_source("fashion-mnist", str(tmp_path / "first"))
    assert dataset_source("fashion-mnist", str(tmp_path / "second")) == first
    changed = tmp_path / "second" / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(changed.read_bytes())
    data[-1] ^= 0xFF  # another byte, the same size: only the content tells
    changed.write_bytes(bytes(data))
    assert dataset_source("fashion-mnist", str(tmp_path / "second")) != first


def test_idx_round_trip(tmp_path: Path) -> None:
    array = RNG.integers(0, 256, (3, 4, 5), dtype=np.uint8)
    write_idx(tmp_path / "a.gz", array)
    assert np.array_equal(read_idx(tmp_path / "a.gz"), array)


def test_truncated_idx_is_a_format_error(tmp_path: Path) -> None:
    write_idx(tmp_path / "a.gz", np.zeros((3, 4), dtype=np.uint8))
    import gzip

    raw = gzip.decompress((tmp_path / "a.gz").read_bytes())
    (tmp_path / "b").write_bytes(raw[:-2])
    with pytest.raises(DataFormatError, match="header says"):
        read_idx(tmp_path / "b")


@pytest.mark.parametrize("name", ["fashion-mnist", "mnist"])
def test_mnist_family_from_idx_files(tmp_path: Path, name: str) -> None:
    train_x, train_y = write_mnist_like(tmp_path / name)
    splits = load_dataset.__wrapped__(name, str(tmp_path))
    assert splits.train.images.shape == (40, 1, 28, 28) and splits.test.images.shape == (10, 1, 28, 28)
    assert np.array_equal(splits.train.images[:, 0], train_x)
    assert np.array_equal(splits.train.labels, train_y)


def test_cifar10_from_python_pickles(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    first = write_cifar_batch(folder / "data_batch_1", 6, b"labels", 10)
    for i in range(2, 6):
        write_cifar_batch(folder / f"data_batch_{i}", 6, b"labels", 10)
    write_cifar_batch(folder / "test_batch", 4, b"labels", 10)
    splits = load_dataset.__wrapped__("cifar10", str(tmp_path))
    assert splits.train.images.shape == (30, 3, 32, 32) and len(splits.test) == 4
    # CIFAR rows are 1024 red, then green, then blue values, each row-major.
    assert np.array_equal(splits.train.images[0, 1].ravel(), first[0, 1024:2048])


@pytest.mark.parametrize(("name", "num_labels"), [("cifar100", 100), ("cifar100-coarse", 20)])
def test_cifar100_fine_and_coarse_labels(tmp_path: Path, name: str, num_labels: int) -> None:
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    for split, n in (("train", 120), ("test", 30)):
        fine = [i % 100 for i in range(n)]
        coarse = [i % 20 for i in range(n)]
        data = RNG.integers(0, 256, (n, 3072), dtype=np.uint8)
        with (folder / split).open("wb") as handle:
            pickle.dump({b"data": data, b"fine_labels": fine, b"coarse_labels": coarse}, handle)
    splits = load_dataset.__wrapped__(name, str(tmp_path))
    assert splits.train.labels.max() == num_labels - 1
    assert DATASETS[name].num_classes == num_labels


def test_missing_dataset_says_where_it_looked_and_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(DataNotFoundError) as err:
        load_dataset.__wrapped__("cifar10", str(tmp_path / "nowhere"))
    message = str(err.value)
    assert str(tmp_path / "nowhere" / "cifar-10-batches-py") in message
    assert "cifar-10-python.tar.gz" in message and "data-dir" in message


def test_corrupt_cifar_batch_is_a_format_error(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    (folder / "train").write_bytes(b"not a pickle")
    (folder / "test").write_bytes(b"not a pickle")
    with pytest.raises(DataFormatError, match="cannot read CIFAR batch"):
        load_dataset.__wrapped__("cifar100", str(tmp_path))


def test_embedded_mini_is_balanced_real_fashion_mnist() -> None:
    splits = load_dataset("fashion-mnist-mini")
    assert splits.train.images.shape == (6000, 1, 28, 28) and splits.test.images.shape == (1000, 1, 28, 28)
    assert np.array_equal(np.bincount(splits.train.labels), np.full(10, 600))
    assert np.array_equal(np.bincount(splits.test.labels), np.full(10, 100))
    assert 60 < splits.train.images.mean() < 90  # Fashion-MNIST's mean pixel is about 72.9


def test_synthetic_is_deterministic() -> None:
    a, b = load_dataset.__wrapped__("synthetic"), load_dataset.__wrapped__("synthetic")
    assert np.array_equal(a.train.images, b.train.images) and a.train.labels.max() == 3


def _split(**kw) -> FederatedSplit:
    base = dict(
        dataset="fashion-mnist-mini",
        data_dir="",
        partitioner="dirichlet",
        dirichlet_alpha=0.5,
        min_partition_size=10,
        self_balancing=False,
        classes_per_client=2,
        public_fraction=0.1,
        seed=0,
    )
    return FederatedSplit(**{**base, **kw})


def test_clients_never_see_the_servers_public_split() -> None:
    split = _split()
    public = load_public_split(split)
    assert len(public) == 600
    public_rows = {img.tobytes() for img in public.images}
    for pid in range(5):
        part = load_client_partition(split, pid, 5)
        assert not public_rows & {img.tobytes() for img in part.images}
    assert sum(partition_sizes(split, 5)) == 5400


def test_partition_id_out_of_range() -> None:
    with pytest.raises(ValueError, match="partition-id 5 is outside"):
        load_client_partition(_split(), 5, 5)


SOUND_DATA = np.zeros((4, 3072), np.uint8)


def cifar10_folder(tmp_path: Path, first_batch: dict) -> Path:
    """A cifar-10-batches-py folder whose data_batch_1 is ``first_batch``; every other batch is sound."""
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    with (folder / "data_batch_1").open("wb") as handle:
        pickle.dump(first_batch, handle)
    for name in [f"data_batch_{i}" for i in range(2, 6)] + ["test_batch"]:
        write_cifar_batch(folder / name, 4, b"labels", 10)
    return folder / "data_batch_1"


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        ({b"data": np.zeros((4, 3000), np.uint8), b"labels": [0] * 4}, "'data' is uint8 (4, 3000), expected uint8"),
        ({b"data": np.zeros(3072 * 4, np.uint8), b"labels": [0] * 4}, "'data' is uint8 (12288,), expected uint8"),
        ({b"data": np.zeros((4, 3072), np.int64), b"labels": [0] * 4}, "'data' is int64 (4, 3072), expected uint8"),
        ({b"data": [[0] * 3072] * 4, b"labels": [0] * 4}, "'data' is list, expected uint8 N x 3072"),
        ({b"data": SOUND_DATA, b"labels": [0] * 3}, "'labels': labels are int64 (3,), expected 4 integers"),
        ({b"data": SOUND_DATA, b"labels": ["a"] * 4}, "labels are <U1 (4,), expected 4 integers"),
        ({b"data": SOUND_DATA, b"labels": [0, 1, 2, 10]}, "labels span 0..10, but 'cifar10' has classes 0..9"),
        ({b"data": SOUND_DATA, b"labels": [0, -1, 2, 3]}, "labels span -1..3"),
        ({b"data": SOUND_DATA, b"labels": 4}, "'labels' is int, expected a list of 4 labels"),
    ],
)
def test_cifar_batch_of_the_wrong_shape_or_classes_is_refused_naming_the_file(
    tmp_path: Path, batch: dict, expected: str
) -> None:
    path = cifar10_folder(tmp_path, batch)
    with pytest.raises(DataFormatError) as err:
        load_dataset.__wrapped__("cifar10", str(tmp_path))
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value)


def test_cifar_file_holding_no_dict_is_refused(tmp_path: Path) -> None:
    path = cifar10_folder(tmp_path, {})
    path.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(DataFormatError, match=f"{path} holds a list, not a CIFAR batch"):
        load_dataset.__wrapped__("cifar10", str(tmp_path))


def test_idx_images_that_are_not_28_by_28_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "mnist"
    write_mnist_like(folder)
    write_idx(folder / "train-images-idx3-ubyte.gz", RNG.integers(0, 256, (40, 32, 32), dtype=np.uint8))
    with pytest.raises(DataFormatError) as err:
        load_dataset.__wrapped__("mnist", str(tmp_path))
    assert str(err.value) == (
        f"{folder / 'train-images-idx3-ubyte.gz'}: images are uint8 (40, 1, 32, 32), expected "
        "uint8 N x 1 x H x W with H x W = 28 x 28 for 'mnist'"
    )


def test_idx_labels_outside_the_classes_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "fashion-mnist"
    write_mnist_like(folder)
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.full(10, 12, dtype=np.uint8))
    with pytest.raises(DataFormatError, match=r"t10k-labels-idx1-ubyte.gz: labels span 12..12, but 'fashion-mnist'"):
        load_dataset.__wrapped__("fashion-mnist", str(tmp_path))


def test_idx_image_and_label_counts_must_match(tmp_path: Path) -> None:
    folder = tmp_path / "mnist"
    write_mnist_like(folder)
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.zeros(39, dtype=np.uint8))
    with pytest.raises(DataFormatError, match=r"\(40, 28, 28\) and .*train-labels-idx1-ubyte.gz \(39,\) do not match"):
        load_dataset.__wrapped__("mnist", str(tmp_path))


def test_idx_header_cut_short_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(bytes([0, 0, 8, 3, 0, 0]))
    with pytest.raises(DataFormatError, match="the header of 3 dimensions is cut short"):
        read_idx(tmp_path / "a")


def test_embedded_set_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    import base64
    import io
    import json

    buffer = io.BytesIO()
    np.savez(
        buffer,
        train_images=np.zeros((4, 1, 32, 32), np.uint8),
        train_labels=np.zeros(4, np.uint8),
        test_images=np.zeros((2, 1, 28, 28), np.uint8),
        test_labels=np.zeros(2, np.uint8),
    )
    source = tmp_path / "mini.json"
    source.write_text(json.dumps({"npz_base85": base64.b85encode(buffer.getvalue()).decode()}))
    with pytest.raises(DataFormatError, match=r"mini.json \(train\): images are uint8 \(4, 1, 32, 32\), expected"):
        load_mini(source)
    source.write_text("{}")
    with pytest.raises(DataFormatError, match=r"cannot read the embedded data set .*mini.json: KeyError"):
        load_mini(source)


def test_partition_sizes_are_listed_for_a_small_population_and_summarised_for_a_large_one() -> None:
    assert describe_sizes([5, 4, 5]) == "[5, 4, 5]"
    sizes = [1] * 48_000 + [0] * 52_000  # full Fashion-MNIST's 48,000 client images over 100,000 clients
    assert describe_sizes(sizes) == "0 to 1 (median 0; 52000 of 100000 empty)"
