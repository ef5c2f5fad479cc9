"""Whether loaded images and labels are what a dataset holds: every loader checks them before use, so a
file of the wrong shape, size or class range stops a run with a message instead of training on garbage."""

from __future__ import annotations

import numpy as np

from data.catalog import DatasetInfo


def images_problem(images: np.ndarray, info: DatasetInfo) -> str | None:
    """Why ``images`` are not uint8 N x C x H x W images of ``info``'s channels and size, or None."""
    height, width = info.image_size
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != (info.channels, height, width):
        return (
            f"images are {images.dtype} {images.shape}, expected uint8 N x {info.channels} x H x W "
            f"with H x W = {height} x {width} for {info.name!r}"
        )
    return None


def labels_problem(labels: np.ndarray, count: int, info: DatasetInfo) -> str | None:
    """Why ``labels`` are not ``count`` integer labels within ``info``'s classes, or None."""
    if labels.shape != (count,) or labels.dtype.kind not in "iu":
        return f"labels are {labels.dtype} {labels.shape}, expected {count} integers"
    if count and (labels.min() < 0 or labels.max() >= info.num_classes):
        return f"labels span {labels.min()}..{labels.max()}, but {info.name!r} has classes 0..{info.num_classes - 1}"
    return None
