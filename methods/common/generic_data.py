"""The server's generic dataset D_g (thesis Ch. 5): images the server holds to transfer knowledge between the global
model and custom-size client models, never given to a client.

- ``common.generic-source = "public"``: drawn from the server's held-out share of the training set (``public-fraction``,
  which no client ever receives), labelled with the task's classes: FedAT's D_g, e.g. 2,500 images of classes
  {1, 2, 3, 4, 6, 7, 9} (``common.generic-classes``) in §5.4.2.
- ``common.generic-source = "dataset"``: drawn from another dataset's training set (``common.generic-dataset``), used
  unlabelled: FedKAD's disjoint generic set (CIFAR-100 for CIFAR-10 in §5.6).

``common.generic-size`` images are drawn once, uniformly without replacement and seeded, from the source restricted to
``common.generic-classes``; a source too small for the draw stops the run at start, naming the key.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from data.catalog import DATASET_NAMES, DATASETS, DatasetInfo
from data.federated import FederatedSplit
from data.image_data import ImageData
from data.loading import load_dataset
from data.partitioning import split_public
from data.transforms import to_model_input
from run_config.settings import ConfigError, one_of, positive, setting

SOURCE_KEY, DATASET_KEY, CLASSES_KEY, SIZE_KEY = (
    "common.generic-source",
    "common.generic-dataset",
    "common.generic-classes",
    "common.generic-size",
)


def _class_list(v: str) -> str | None:
    try:
        parse_classes(v)
    except ValueError as err:
        return str(err)
    return None


@dataclass(frozen=True)
class GenericDataSettings:
    NAMESPACE: ClassVar[str] = "common"

    generic_source: str = setting(
        "public",
        "Where the server's generic dataset D_g (FedAT, FedKAD, FedMD) comes from: `public` (the held-out "
        "`public-fraction` of the training set, labelled) or `dataset` (`common.generic-dataset`'s training set, "
        "unlabelled).",
        one_of("public", "dataset"),
    )
    generic_dataset: str = setting(
        "mnist",
        'The dataset D_g is drawn from with `common.generic-source = "dataset"` (same number of image channels).',
        one_of(*DATASET_NAMES),
    )
    generic_classes: str = setting(
        "",
        "Classes D_g is drawn from, comma-separated (e.g. `1,2,3,4,6,7,9`, thesis §5.4.2); empty = all.",
        _class_list,
    )
    generic_size: int = setting(
        1000,
        "Images in D_g, drawn once (seeded) from its source and classes (§5.4.2 draws 2,500 of CIFAR-10; 1,000 fit the "
        "1,200 images `fashion-mnist-mini` holds out at `public-fraction` 0.2).",
        positive,
    )


def parse_classes(text: str) -> tuple[int, ...]:
    """``"1,2,9"`` -> (1, 2, 9); empty -> () (all classes). Refuses non-integers, negatives and repeats."""
    if not text.strip():
        return ()
    try:
        classes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"must list class numbers separated by commas, got {text!r}") from None
    if any(c < 0 for c in classes) or len(set(classes)) != len(classes):
        raise ValueError(f"must list distinct class numbers >= 0, got {text!r}")
    return classes


def draw_generic(
    labels: np.ndarray, candidates: np.ndarray, classes: tuple[int, ...], size: int, seed: int
) -> np.ndarray:
    """``size`` positions drawn uniformly without replacement from ``candidates`` whose label is in ``classes``
    (all when empty), sorted; raise ``ConfigError`` naming ``common.generic-size`` when fewer are available."""
    pool = candidates[np.isin(labels[candidates], classes)] if classes else candidates
    if size > len(pool):
        raise ConfigError(
            f"run config '{SIZE_KEY}' = {size} asks for more images than the generic source holds: {len(pool)}"
            + (f" of classes {', '.join(map(str, classes))}" if classes else "")
            + f" (raise 'public-fraction' or lower '{SIZE_KEY}')"
        )
    rng = np.random.default_rng([seed, 0x6E4E])
    return np.sort(rng.choice(pool, size=size, replace=False))


@dataclass(frozen=True)
class GenericData:
    """D_g as model inputs (normalised with its own dataset's statistics) and labels (the task's classes only for
    ``public``), with the training-set positions it was drawn from (to check it never reaches a client)."""

    inputs: torch.Tensor
    labels: torch.Tensor
    positions: np.ndarray
    labelled: bool

    def __len__(self) -> int:
        return len(self.labels)


def _source(split: FederatedSplit, settings: GenericDataSettings) -> tuple[ImageData, np.ndarray, DatasetInfo]:
    """The source's images, the candidate positions in them, and its dataset facts."""
    if settings.generic_source == "public":
        train = load_dataset(split.dataset, split.data_dir).train
        if split.public_fraction == 0:
            raise ConfigError(f"run config '{SOURCE_KEY}' = 'public' needs a held-out split: set 'public-fraction' > 0")
        return train, split_public(train.labels, split.public_fraction, split.seed)[1], split.info
    source, target = DATASETS[settings.generic_dataset], split.info
    if source.channels != target.channels:
        raise ConfigError(
            f"run config '{DATASET_KEY}' = {settings.generic_dataset!r} has {source.channels}-channel images but "
            f"dataset {split.dataset!r} has {target.channels}"
        )
    if settings.generic_dataset == split.dataset:
        raise ConfigError(
            f"run config '{DATASET_KEY}' names the clients' own dataset; use '{SOURCE_KEY}' = 'public' for a "
            "held-out share of it"
        )
    train = load_dataset(settings.generic_dataset, split.data_dir).train
    return train, np.arange(len(train)), source


def generic_positions(split: FederatedSplit, settings: GenericDataSettings) -> np.ndarray:
    """Where D_g lies in its source's training set (checks the settings; raises ``ConfigError`` naming the key)."""
    train, candidates, info = _source(split, settings)
    classes = parse_classes(settings.generic_classes)
    if classes and max(classes) >= info.num_classes:
        raise ConfigError(
            f"run config '{CLASSES_KEY}' = {settings.generic_classes!r} names a class beyond the "
            f"{info.num_classes} of {info.name}"
        )
    return draw_generic(train.labels, candidates, classes, settings.generic_size, split.seed)


@functools.lru_cache(maxsize=2)
def load_generic_data(split: FederatedSplit, settings: GenericDataSettings) -> GenericData:
    """D_g on the CPU; move ``inputs`` to the server's device once."""
    train, _, info = _source(split, settings)
    positions = generic_positions(split, settings)
    chosen = train.subset(positions)
    return GenericData(
        to_model_input(chosen.images, info),
        torch.from_numpy(chosen.labels),
        positions,
        labelled=settings.generic_source == "public",
    )
