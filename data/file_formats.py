"""Readers for the datasets' standard distribution formats.

- IDX (``*-ubyte.gz``): the MNIST family (http://yann.lecun.com/exdb/mnist/).
- CIFAR "python version" pickles: ``cifar-10-batches-py/`` and ``cifar-100-python/``.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np

from data.image_data import ImageData

_IDX_DTYPES = {0x08: np.uint8}


class DataFormatError(ValueError):
    """A data file exists but is not in the expected format."""


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (optionally gzip-compressed) of unsigned bytes into an array of its shape."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as err:
        raise DataFormatError(f"cannot read IDX file {path}: {err}") from err
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DataFormatError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    header = 4 + 4 * ndim
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


def read_idx_pair(images_path: Path, labels_path: Path) -> ImageData:
    """An IDX image file (N x H x W) and its label file (N) as ImageData with one channel."""
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataFormatError(f"{images_path} {images.shape} and {labels_path} {labels.shape} do not match")
    return ImageData(images[:, None, :, :].copy(), labels.astype(np.int64))


def read_cifar_pickles(paths: list[Path], label_key: str) -> ImageData:
    """Concatenate CIFAR python-pickle batches (``data``: N x 3072 uint8, ``label_key``: N labels)."""
    images, labels = [], []
    for path in paths:
        try:
            with path.open("rb") as handle:
                batch = pickle.load(handle, encoding="bytes")
        except (OSError, pickle.UnpicklingError, EOFError) as err:
            raise DataFormatError(f"cannot read CIFAR batch {path}: {err}") from err
        batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
        if "data" not in batch or label_key not in batch:
            raise DataFormatError(f"{path} has no 'data' or '{label_key}' entry")
        images.append(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.append(np.asarray(batch[label_key], dtype=np.int64))
    return ImageData(np.concatenate(images), np.concatenate(labels))
