"""A user's own data, generated for tests: image folders (one sub-folder per class, PNG) and Hugging Face datasets
saved with ``save_to_disk``, of a learnable task: noise with a bright square in the class's quadrant, in colour the
class's own colour too (so that a model that pools over positions learns it as well)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features
from datasets import Image as ImageFeature
from PIL import Image

CLASSES = ("north-west", "north-east", "south-west", "south-east")


def images_of(count: int, size: int = 32, channels: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``count`` uint8 N x H x W (x 3) images and their labels (0..3, balanced)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(count) % len(CLASSES)
    rng.shuffle(labels)
    images = rng.integers(0, 96, size=(count, size, size, channels)).astype(np.uint8)  # N x H x W x C
    half, edge = size // 2, size // 8
    for label in range(len(CLASSES)):
        row, col = divmod(label, 2)
        square = (
            slice(row * half + edge, row * half + half - edge),
            slice(col * half + edge, col * half + half - edge),
        )
        colour = [label % 3] if label < 3 else list(range(channels))
        for channel in colour if channels == 3 else [0]:
            images[labels == label, square[0], square[1], channel] += 128
    return (images[..., 0] if channels == 1 else images), labels


def write_image_folder(folder: Path, count: int = 200, size: int = 32, channels: int = 3, seed: int = 0) -> Path:
    """``folder/<class>/<i>.png`` for ``count`` images; returns ``folder``."""
    images, labels = images_of(count, size, channels, seed)
    for index, (image, label) in enumerate(zip(images, labels)):
        target = folder / CLASSES[label]
        target.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(target / f"{index}.png")
    return folder


def write_hf_dataset(
    folder: Path,
    count: int = 200,
    size: int = 32,
    seed: int = 0,
    test: int = 0,
    columns: tuple[str, str] = ("img", "fine"),
) -> Path:
    """A DatasetDict (``train``, and ``test`` of ``test`` images when > 0) with an Image column and a ClassLabel
    column (``columns``), saved to ``folder``."""
    image_column, label_column = columns
    features = Features({image_column: ImageFeature(), label_column: ClassLabel(names=list(CLASSES))})

    def part(n: int, part_seed: int) -> Dataset:
        images, labels = images_of(n, size, 3, part_seed)
        return Dataset.from_dict(
            {image_column: [Image.fromarray(image) for image in images], label_column: labels.tolist()},
            features=features,
        )

    splits = {"train": part(count, seed)}
    if test:
        splits["test"] = part(test, seed + 1)
    DatasetDict(splits).save_to_disk(str(folder))
    return folder
