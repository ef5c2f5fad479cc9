"""Image transforms in plain torch: normalisation, MNIST 28->32 padding, optional crop/flip.

Images are kept as uint8 until they are used and normalised on the device that computes with them, so a node holds
a quarter of the bytes of float32 inputs and moves a quarter of them to its accelerator.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from data.catalog import DatasetInfo


def normalise(images: torch.Tensor, info: DatasetInfo) -> torch.Tensor:
    """uint8 N x C x H x W -> normalised float32 N x C x 32 x 32 on the images' device (MNIST family zero-padded
    by 2 pixels, applied to the raw image, before normalisation, as torchvision's Pad would)."""
    x = images.float().div_(255.0)
    if info.pad_to_32 and x.shape[-1] == 28:
        x = F.pad(x, (2, 2, 2, 2))
    mean = torch.tensor(info.mean, device=x.device).view(1, -1, 1, 1)
    std = torch.tensor(info.std, device=x.device).view(1, -1, 1, 1)
    return (x - mean) / std


def to_model_input(images: np.ndarray, info: DatasetInfo) -> torch.Tensor:
    """``normalise`` for a NumPy uint8 array, on the CPU."""
    return normalise(torch.from_numpy(np.ascontiguousarray(images)), info)


def random_crop_flip(x: torch.Tensor, generator: torch.Generator, padding: int = 4, flip: bool = True) -> torch.Tensor:
    """Batch augmentation: random crop after zero padding, and horizontal flip with probability 1/2.

    The offsets and flips are drawn from ``generator`` on the CPU (so they do not depend on the device) and applied
    on ``x``'s device with one gather.
    """
    n, channels, h, w = x.shape
    padded = F.pad(x, (padding,) * 4)
    offsets = torch.randint(0, 2 * padding + 1, (n, 2), generator=generator).to(x.device)
    flips = (torch.rand(n, generator=generator) < 0.5).to(x.device) if flip else None
    rows = (offsets[:, 0, None] + torch.arange(h, device=x.device)).view(n, 1, h, 1)
    cols = (offsets[:, 1, None] + torch.arange(w, device=x.device)).view(n, 1, 1, w)
    samples = torch.arange(n, device=x.device).view(n, 1, 1, 1)
    out = padded[samples, torch.arange(channels, device=x.device).view(1, channels, 1, 1), rows, cols]
    if flips is not None:
        out = torch.where(flips.view(n, 1, 1, 1), out.flip(-1), out)
    return out
