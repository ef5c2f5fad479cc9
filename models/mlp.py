"""The MNIST "2NN" of McMahan et al. (784-200-200-10), KAFAL's MNIST model (Cao et al., supplementary A.8).

Images reach every model as C x 32 x 32, MNIST zero-padded by 2 pixels on each side. The 2NN first crops
the centre ``crop`` x ``crop`` window (default 28), which for padded MNIST is exactly the original image, so the
network is the paper's 784-200-200-10 with 199,210 parameters. On 32 x 32 colour images the same crop drops a
2-pixel border (3·784 inputs); ``crop=32`` keeps the whole image instead (1024-200-200-10 for one channel).

Stages: ``low`` = the flattened (cropped) input, ``mid`` = first hidden layer (200, ReLU), ``up`` = second
hidden layer (200, ReLU; the penultimate features), ``head`` = Linear(200 -> C). Freezing at ``up`` trains the
classifier only, as for the other models.
"""

from __future__ import annotations

import torch
from torch import nn

from models.split_model import SplitModel

HIDDEN_UNITS = 200


class CentreCropFlatten(nn.Module):
    """Crop the centre ``size`` x ``size`` window of N x C x H x W images and flatten it to N x (C·size²)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        if height < self.size or width < self.size:
            raise ValueError(f"2NN crops {self.size}x{self.size} but got {height}x{width} images")
        top, left = (height - self.size) // 2, (width - self.size) // 2
        return x[..., top : top + self.size, left : left + self.size].flatten(1)


class MLP2NN(SplitModel):
    """Two hidden layers of 200 ReLU units; split levels ``low``, ``mid`` and ``up``."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, crop: int = 28) -> None:
        if crop < 1:
            raise ValueError(f"2NN crop must be >= 1, got {crop}")
        stages = {
            "low": CentreCropFlatten(crop),
            "mid": nn.Sequential(nn.Linear(in_channels * crop * crop, HIDDEN_UNITS), nn.ReLU()),
            "up": nn.Sequential(nn.Linear(HIDDEN_UNITS, HIDDEN_UNITS), nn.ReLU()),
            "head": nn.Linear(HIDDEN_UNITS, num_classes),
        }
        super().__init__(stages, levels=("low", "mid", "up"))
        self.crop = crop
