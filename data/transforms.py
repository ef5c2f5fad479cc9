"""Image transforms in plain torch: normalisation, MNIST 28->32 padding, optional crop/flip."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from data.catalog import DatasetInfo


def to_model_input(images: np.ndarray, info: DatasetInfo) -> torch.Tensor:
    """uint8 N x C x H x W -> normalised float32 N x C x 32 x 32 (MNIST family zero-padded by 2 pixels).

    Padding is applied to the raw image (black border), before normalisation, as torchvision's Pad would.
    """
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    if info.pad_to_32 and x.shape[-1] == 28:
        x = F.pad(x, (2, 2, 2, 2))
    mean = torch.tensor(info.mean).view(1, -1, 1, 1)
    std = torch.tensor(info.std).view(1, -1, 1, 1)
    return (x - mean) / std


def random_crop_flip(x: torch.Tensor, generator: torch.Generator, padding: int = 4, flip: bool = True) -> torch.Tensor:
    """Batch augmentation: random crop after zero padding, and horizontal flip with probability 1/2."""
    n, _, h, w = x.shape
    padded = F.pad(x, (padding,) * 4)
    offsets = torch.randint(0, 2 * padding + 1, (n, 2), generator=generator).tolist()
    out = torch.stack([padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets)])
    if flip:
        mask = torch.rand(n, generator=generator) < 0.5
        out[mask] = out[mask].flip(-1)
    return out
