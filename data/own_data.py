"""A user's own data, named by its absolute path in ``dataset`` (or ``pretrain-dataset``): a folder of images with
one sub-folder per class, or a Hugging Face dataset saved with ``save_to_disk``.

What the models need is read from the data: the images' size and channels, the classes (the sub-folders' names in
sorted order, or the label column's ``ClassLabel`` names, else its distinct values in sorted order) and the
per-channel normalisation statistics of the training images. The images are decoded once (with ``data-cache-dir``,
once per machine, ``data/array_cache.py``, under a key of every file's name, size and modification time) and checked
on the way: no images, one class, images of several sizes or a file that is no readable image stop the run with one
line naming the folder and the problem (``DataFormatError``). Modes are reconciled: if any image is in colour, all are
read as RGB, else as greyscale (an alpha channel is dropped). 28 x 28 images are zero-padded to 32 x 32 as MNIST's
are; any other size reaches the model as it is.

Layouts: ``<folder>/<class>/<image>`` (PNG or JPEG, at any depth below the class folder), with a stratified
``TEST_FRACTION`` held out as the test set, the same for every run (seeded by ``TEST_SEED``, not by ``seed``); or
``<folder>/train/<class>/...`` beside ``<folder>/test/<class>/...``. A saved ``DatasetDict``'s ``test`` split is
the test set; a single ``Dataset``, or a ``DatasetDict`` without one, has a share held out the same way. Images and
labels are the columns ``image-column`` and ``label-column`` name; Pillow (which matplotlib brings) and ``datasets``
(which flwr-datasets brings) are imported only to read such data.
"""

from __future__ import annotations

import functools
import io
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data.array_cache import cached_arrays
from data.catalog import DATASETS, DatasetInfo
from data.file_formats import DataFormatError, DataNotFoundError
from data.image_data import DatasetSplits, ImageData
from data.partitioning import split_public

#: The image column and the label column of a Hugging Face dataset.
Columns = tuple[str, str]
DEFAULT_COLUMNS: Columns = ("image", "label")
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg"})
#: Share of the images held out as the test set when the data has none, and the seed of that draw.
TEST_FRACTION, TEST_SEED = 0.2, 0
#: Files ``save_to_disk`` writes: a DatasetDict's, a Dataset's.
HF_MARKERS = ("dataset_dict.json", "state.json")
#: Pillow modes read as one channel; every other mode is read as RGB.
_GREY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "F"})
#: Bumped when what a decoded entry holds changes.
OWN_DATA_VERSION = 1


def is_own_dataset(name: str) -> bool:
    """Whether ``name`` is a path to a user's own data rather than a catalogued dataset."""
    return name not in DATASETS


def own_folder(name: str) -> Path:
    """The folder ``name`` points to; ``DataNotFoundError`` saying what a dataset may be when it is none."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise DataNotFoundError(
            f"dataset {name!r} is not a folder on this machine: give the absolute path of an image folder (one "
            f"sub-folder per class) or of a Hugging Face dataset saved with save_to_disk, or one of the catalogued "
            f"datasets: {', '.join(DATASETS)}"
        )
    return folder


def is_saved_hf_dataset(folder: Path) -> bool:
    return any((folder / marker).is_file() for marker in HF_MARKERS)


def describe(name: str) -> str:
    """What ``name`` is, for the log and for messages: ``image folder '/x'`` or ``Hugging Face dataset '/x'``."""
    folder = own_folder(name)
    return f"{'Hugging Face dataset' if is_saved_hf_dataset(folder) else 'image folder'} '{folder}'"


def own_source(name: str, columns: Columns = DEFAULT_COLUMNS) -> dict[str, Any]:
    """What identifies the data (the folder, and every file's name, size and modification time below it; the columns
    of a Hugging Face dataset): two folders never share it, and a changed file changes it."""
    folder = own_folder(name)
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    return {
        "folder": str(folder.resolve()),
        "files": [[str(path.relative_to(folder)), path.stat().st_size, path.stat().st_mtime_ns] for path in files],
        "columns": list(columns) if is_saved_hf_dataset(folder) else None,
    }


@dataclass(frozen=True)
class _Image:
    """One image to decode: where it is (for messages) and how to open it with Pillow."""

    where: str
    open: Callable[[], Any]


@dataclass(frozen=True)
class _Listed:
    """The images of a dataset and their labels, before decoding; ``test`` is None when none is given."""

    train: list[_Image]
    train_labels: np.ndarray
    test: list[_Image] | None
    test_labels: np.ndarray | None
    classes: list[str]


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise DataFormatError(
            "reading your own images needs Pillow: `pip install pillow` (matplotlib, in the app's `experiments` "
            "extra, brings it)"
        ) from None
    return Image


def _visible(path: Path) -> bool:
    return not path.name.startswith(".")


def _class_folder_images(root: Path, desc: str) -> tuple[list[str], list[list[Path]]]:
    classes = sorted(sub.name for sub in root.iterdir() if sub.is_dir() and _visible(sub))
    files = [
        sorted(
            path
            for path in (root / name).rglob("*")
            if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES and _visible(path)
        )
        for name in classes
    ]
    if not any(files):
        raise DataFormatError(f"{desc} holds no images: put PNG or JPEG files in one sub-folder per class")
    empty = [name for name, found in zip(classes, files) if not found]
    if empty:
        raise DataFormatError(f"{desc}: class folder {empty[0]!r} holds no PNG or JPEG images")
    return classes, files


def _folder_listing(folder: Path, desc: str) -> _Listed:
    image = _pillow()
    subfolders = {sub.name for sub in folder.iterdir() if sub.is_dir() and _visible(sub)}
    split = subfolders == {"train", "test"}
    classes, files = _class_folder_images(folder / "train" if split else folder, desc)

    def listed(groups: list[list[Path]]) -> tuple[list[_Image], np.ndarray]:
        images = [
            _Image(f"'{path.relative_to(folder)}'", functools.partial(image.open, path))
            for group in groups
            for path in group
        ]
        return images, np.repeat(np.arange(len(groups)), [len(group) for group in groups])

    train, train_labels = listed(files)
    if not split:
        return _Listed(train, train_labels, None, None, classes)
    test_classes, test_files = _class_folder_images(folder / "test", f"{desc} (test/)")
    if test_classes != classes:
        raise DataFormatError(
            f"{desc}: test/ has the classes {', '.join(test_classes)} but train/ has {', '.join(classes)}"
        )
    test, test_labels = listed(test_files)
    return _Listed(train, train_labels, test, test_labels, classes)


def _hf_listing(folder: Path, desc: str, columns: Columns) -> _Listed:
    try:
        from datasets import ClassLabel, DatasetDict, load_from_disk
        from datasets import Image as ImageFeature
    except ImportError:
        raise DataFormatError(
            f"{desc}: reading a saved Hugging Face dataset needs `datasets` (flwr-datasets, in the app's "
            "`simulation` extra, brings it)"
        ) from None
    image = _pillow()
    try:
        loaded = load_from_disk(str(folder))
    except Exception as err:  # a damaged save surfaces as any of several exception types
        raise DataFormatError(f"{desc} cannot be loaded with load_from_disk ({type(err).__name__}: {err})") from None
    if isinstance(loaded, DatasetDict):
        names = list(loaded)
        if "train" not in loaded and len(names) != 1:
            raise DataFormatError(f"{desc} has the splits {', '.join(names)} but no 'train' split")
        train_set, test_set = loaded["train" if "train" in loaded else names[0]], loaded.get("test")
    else:
        train_set, test_set = loaded, None
    image_column, label_column = columns
    for column, key in ((image_column, "image-column"), (label_column, "label-column")):
        if column not in train_set.column_names:
            raise DataFormatError(
                f"{desc} has no column {column!r} (its columns: {', '.join(train_set.column_names)}): set '{key}'"
            )
    label_feature = train_set.features[label_column]
    sets = [train_set] if test_set is None else [train_set, test_set]
    raw_labels = [list(part[label_column]) for part in sets]
    if isinstance(label_feature, ClassLabel):
        classes = list(label_feature.names)
        labels = [np.asarray(values, dtype=np.int64) for values in raw_labels]
    else:
        values = sorted({value for part in raw_labels for value in part})
        classes = [str(value) for value in values]
        index = {value: position for position, value in enumerate(values)}
        labels = [np.asarray([index[value] for value in part], dtype=np.int64) for part in raw_labels]

    def listed(part: Any, split_name: str) -> list[_Image]:
        if isinstance(part.features[image_column], ImageFeature):
            rows = part.cast_column(image_column, ImageFeature(decode=False))[image_column]
            return [
                _Image(f"{split_name} row {row}", functools.partial(_stored_image, image, cell))
                for row, cell in enumerate(rows)
            ]
        return [
            _Image(f"{split_name} row {row}", functools.partial(_array_image, image, cell, f"{split_name} row {row}"))
            for row, cell in enumerate(part[image_column])
        ]

    outside = [part for part in labels if len(part) and (part.min() < 0 or part.max() >= len(classes))]
    if outside:
        raise DataFormatError(
            f"{desc}: column {label_column!r} holds labels {outside[0].min()}..{outside[0].max()}, outside its "
            f"{len(classes)} classes"
        )
    train = listed(train_set, "train")
    test = listed(test_set, "test") if test_set is not None else None
    return _Listed(train, labels[0], test, labels[1] if test is not None else None, classes)


def _stored_image(image: Any, cell: dict[str, Any]) -> Any:
    """A Hugging Face ``Image`` cell (its bytes, else its file) opened with Pillow, from its start each time."""
    return image.open(io.BytesIO(cell["bytes"])) if cell.get("bytes") else image.open(cell["path"])


def _array_image(image: Any, cell: Any, where: str) -> Any:
    """A cell holding pixels (H x W or H x W x C integers in 0..255) as a Pillow image."""
    array = np.asarray(cell)
    if (
        array.dtype.kind not in "iu"
        or array.ndim not in (2, 3)
        or array.size == 0
        or array.min() < 0
        or array.max() > 255
    ):
        raise ValueError(f"{where} is a {array.dtype} array of shape {array.shape}, not pixels in 0..255")
    return image.fromarray(array.astype(np.uint8))


def _decode(images: Sequence[_Image], desc: str) -> np.ndarray:
    """Every image as uint8 N x C x H x W: one size (else refused), greyscale unless any is in colour."""
    sizes: Counter[tuple[int, int]] = Counter()
    example: dict[tuple[int, int], str] = {}
    colour = False

    def unreadable(item: _Image, err: Exception) -> DataFormatError:
        return DataFormatError(f"{desc}: {item.where} is no readable image ({type(err).__name__}: {err})")

    for item in images:  # headers only: sizes and modes
        try:
            with item.open() as picture:
                sizes[picture.size] += 1
                example.setdefault(picture.size, item.where)
                colour = colour or picture.mode not in _GREY_MODES
        except Exception as err:  # Pillow reports a bad file as OSError, ValueError, SyntaxError, ...
            raise unreadable(item, err) from None
    if len(sizes) > 1:
        common = sizes.most_common()
        counts = ", ".join(f"{w}x{h}: {n} (e.g. {example[(w, h)]})" for (w, h), n in common[:3])
        counts += f" and {len(common) - 3} more sizes" if len(common) > 3 else ""
        raise DataFormatError(f"{desc} holds images of several sizes ({counts}): resize them to one size")
    (width, height) = next(iter(sizes))
    mode, channels = ("RGB", 3) if colour else ("L", 1)
    decoded = np.empty((len(images), channels, height, width), dtype=np.uint8)
    for row, item in enumerate(images):
        try:
            with item.open() as picture:
                pixels = np.asarray(picture.convert(mode), dtype=np.uint8)
        except Exception as err:  # a truncated file fails only when decoded
            raise unreadable(item, err) from None
        decoded[row] = pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)
    return decoded


def channel_statistics(images: np.ndarray, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of uint8 N x C x H x W images scaled to [0, 1] (a constant channel's
    deviation is taken as 1, so normalising never divides by 0)."""
    channels = images.shape[1]
    total, squares = np.zeros(channels), np.zeros(channels)
    for start in range(0, len(images), chunk):
        block = images[start : start + chunk].astype(np.float64) / 255.0
        total += block.sum(axis=(0, 2, 3))
        squares += np.square(block).sum(axis=(0, 2, 3))
    count = max(images.shape[0] * images.shape[2] * images.shape[3], 1)
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - np.square(mean), 0.0))
    return mean, np.where(std > 1e-6, std, 1.0)


def _decode_all(name: str, columns: Columns) -> dict[str, np.ndarray]:
    folder = own_folder(name)
    desc = describe(name)
    listing = _hf_listing(folder, desc, columns) if is_saved_hf_dataset(folder) else _folder_listing(folder, desc)
    if not listing.train:
        raise DataFormatError(f"{desc} holds no images")
    present = np.unique(listing.train_labels)
    if len(listing.classes) < 2 or len(present) < 2:
        only = listing.classes[int(present[0])] if len(present) else "none"
        raise DataFormatError(
            f"{desc} holds one class ({only!r}): a classifier needs at least two (one sub-folder per class, or "
            "two label values)"
        )
    images = _decode(listing.train + (listing.test or []), desc)
    train_images, test_images = images[: len(listing.train)], images[len(listing.train) :]
    train_labels = listing.train_labels
    if listing.test is None:
        kept, held_out = split_public(train_labels, TEST_FRACTION, TEST_SEED)
        if len(held_out) == 0:
            raise DataFormatError(
                f"{desc} holds {len(train_labels)} images: too few to hold out a test set; add more, or give one "
                "(test/ beside train/, or a 'test' split)"
            )
        train_images, test_images = train_images[kept], train_images[held_out]
        test_labels, train_labels = train_labels[held_out], train_labels[kept]
    else:
        test_labels = listing.test_labels
    mean, std = channel_statistics(train_images)
    return {
        "train_images": train_images,
        "train_labels": train_labels.astype(np.int64),
        "test_images": test_images,
        "test_labels": np.asarray(test_labels, dtype=np.int64),
        "mean": mean,
        "std": std,
        "classes": np.asarray(listing.classes, dtype=np.str_),
    }


@dataclass(frozen=True)
class OwnDataset:
    """A user's data, decoded, and what was read from it."""

    splits: DatasetSplits
    info: DatasetInfo


#: What this process knows of a user's datasets (by name and columns): read from the data, or from a node folder
#: exported from it (``data/node_data.py``) on a node that holds no more than its own partition.
_KNOWN: dict[tuple[str, Columns], DatasetInfo] = {}


def remember_info(name: str, columns: Columns, info: DatasetInfo) -> None:
    _KNOWN[(name, columns)] = info


def known_info(name: str, columns: Columns) -> DatasetInfo | None:
    return _KNOWN.get((name, columns))


def _info(name: str, arrays: dict[str, np.ndarray]) -> DatasetInfo:
    train, test = arrays["train_images"], arrays["test_images"]
    height, width = (int(d) for d in train.shape[2:])
    return DatasetInfo(
        name=name,
        channels=int(train.shape[1]),
        num_classes=len(arrays["classes"]),
        mean=tuple(float(v) for v in arrays["mean"]),
        std=tuple(float(v) for v in arrays["std"]),
        pad_to_32=(height, width) == (28, 28),
        train_samples=len(train),
        test_samples=len(test),
        size=(height, width),
        class_names=tuple(str(c) for c in arrays["classes"]),
    )


@functools.lru_cache(maxsize=2)
def own_dataset(name: str, columns: Columns = DEFAULT_COLUMNS, cache: Path | None = None) -> OwnDataset:
    """The user's data at ``name``, decoded and checked once per process (with ``cache``, once per machine and
    memory-mapped); ``DataNotFoundError`` when it is no folder, ``DataFormatError`` naming the folder and the problem
    when it cannot be used."""
    source = own_source(name, columns)
    key = {"kind": "own-dataset", "version": OWN_DATA_VERSION, "source": source}
    arrays = cached_arrays(cache, key, lambda: _decode_all(name, columns))
    info = _info(name, arrays)
    remember_info(name, columns, info)
    return OwnDataset(
        DatasetSplits(
            ImageData(arrays["train_images"], arrays["train_labels"]),
            ImageData(arrays["test_images"], arrays["test_labels"]),
        ),
        info,
    )


def own_info(name: str, columns: Columns = DEFAULT_COLUMNS, cache: Path | None = None) -> DatasetInfo:
    """What the models need of the user's data at ``name``: known already in this process, else read from it."""
    return known_info(name, columns) or own_dataset(name, columns, cache).info


def describe_info(info: DatasetInfo) -> str:
    """``3-channel 32x32 images of 4 classes (a, b, c, d); 400 for training, 100 for testing``."""
    height, width = info.image_size
    names = ", ".join(info.class_names[:8]) + (", ..." if len(info.class_names) > 8 else "")
    return (
        f"{info.channels}-channel {height}x{width} images of {info.num_classes} classes ({names}); "
        f"{info.train_samples} for training, {info.test_samples} for testing"
    )
