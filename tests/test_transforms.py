"""Torch transforms: normalisation, MNIST padding, crop and flip."""

from __future__ import annotations

import numpy as np
import torch

from data.catalog import DATASETS
from data.transforms import random_crop_flip, to_model_input


def test_mnist_family_is_padded_to_32_with_black_border() -> None:
    images = np.full((2, 1, 28, 28), 255, dtype=np.uint8)
    info = DATASETS["fashion-mnist"]
    x = to_model_input(images, info)
    assert x.shape == (2, 1, 32, 32)
    black = (0.0 - info.mean[0]) / info.std[0]
    white = (1.0 - info.mean[0]) / info.std[0]
    assert torch.allclose(x[:, :, :2, :], torch.tensor(black))
    assert torch.allclose(x[:, :, 2:30, 2:30], torch.tensor(white))


def test_cifar_is_normalised_per_channel() -> None:
    info = DATASETS["cifar10"]
    images = np.zeros((1, 3, 32, 32), dtype=np.uint8)
    x = to_model_input(images, info)
    for c in range(3):
        assert torch.allclose(x[0, c], torch.tensor(-info.mean[c] / info.std[c]))


def test_random_crop_flip_keeps_shape_and_content_when_offset_is_central() -> None:
    x = torch.arange(2 * 1 * 8 * 8, dtype=torch.float32).view(2, 1, 8, 8)
    out = random_crop_flip(x, torch.Generator().manual_seed(0), padding=0, flip=False)
    assert torch.equal(out, x)
    out = random_crop_flip(x, torch.Generator().manual_seed(0), padding=2, flip=True)
    assert out.shape == x.shape
