"""In-memory labelled images: the one representation every loader returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ImageData:
    """``images`` is uint8 N x C x H x W, ``labels`` int64 N."""

    images: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        if self.images.dtype != np.uint8 or self.images.ndim != 4:
            raise ValueError(f"images must be uint8 N x C x H x W, got {self.images.dtype} {self.images.shape}")
        if self.labels.shape != (len(self.images),):
            raise ValueError(f"labels shape {self.labels.shape} does not match {len(self.images)} images")

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: np.ndarray) -> ImageData:
        return ImageData(self.images[indices], self.labels[indices])


@dataclass(frozen=True)
class DatasetSplits:
    """A dataset's official training and test sets."""

    train: ImageData
    test: ImageData
