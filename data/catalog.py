"""The datasets the app knows by name (shape, classes and normalisation statistics), and what every dataset, named
or a user's own (``data/own_data.py``), is described by."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a dataset. The catalogued datasets' images reach the models as ``channels`` x 32 x 32 (the
    MNIST family's 28 x 28 zero-padded); a user's own data keeps its images' size (``size``), 28 x 28 padded alike."""

    name: str
    channels: int
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    pad_to_32: bool  # 28x28 MNIST-family images are zero-padded to 32x32
    train_samples: int  # images in the training and test splits, as the loaders give them
    test_samples: int
    size: tuple[int, int] | None = None  # height and width a user's own images share; None: the catalogue's rule
    class_names: tuple[str, ...] = ()  # a user's own classes, in label order (the catalogued ones: not recorded)

    @property
    def image_size(self) -> tuple[int, int]:
        """Height and width of the images as the dataset's files hold them, before any padding."""
        if self.size is not None:
            return self.size
        return (28, 28) if self.pad_to_32 else (32, 32)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """Channels, height and width of one image as a model receives it (after padding)."""
        height, width = (32, 32) if self.pad_to_32 else self.image_size
        return self.channels, height, width


_CIFAR_MEAN, _CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
_CIFAR100_MEAN, _CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)

DATASETS: dict[str, DatasetInfo] = {
    "fashion-mnist": DatasetInfo("fashion-mnist", 1, 10, (0.2860,), (0.3530,), True, 60_000, 10_000),
    "fashion-mnist-mini": DatasetInfo("fashion-mnist-mini", 1, 10, (0.2860,), (0.3530,), True, 6_000, 1_000),
    "mnist": DatasetInfo("mnist", 1, 10, (0.1307,), (0.3081,), True, 60_000, 10_000),
    "cifar10": DatasetInfo("cifar10", 3, 10, _CIFAR_MEAN, _CIFAR_STD, False, 50_000, 10_000),
    "cifar100": DatasetInfo("cifar100", 3, 100, _CIFAR100_MEAN, _CIFAR100_STD, False, 50_000, 10_000),
    "cifar100-coarse": DatasetInfo("cifar100-coarse", 3, 20, _CIFAR100_MEAN, _CIFAR100_STD, False, 50_000, 10_000),
    "synthetic": DatasetInfo("synthetic", 1, 4, (0.5,), (0.25,), False, 800, 200),
}

DATASET_NAMES: tuple[str, ...] = tuple(DATASETS)
