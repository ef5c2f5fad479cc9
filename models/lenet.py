"""LeNet-5 as used by the FedEntOpt paper for 32x32 inputs.

conv5x5(6) -> ReLU -> maxpool2 -> conv5x5(16) -> ReLU -> maxpool2 -> FC120 -> FC84 -> FC C.
Convolutions and linear layers carry biases (the classic LeNet convention): 62,006 parameters for
3-channel input and 10 classes, 61,706 for 1 channel.
Split levels: ``low`` (after the first conv block), ``mid`` (after the second), ``up`` (the 84-d features).
"""

from __future__ import annotations

from torch import nn

from models.split_model import SplitModel


class LeNet5(SplitModel):
    """LeNet-5 with split levels ``low``, ``mid`` and ``up``."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10) -> None:
        stages = {
            "low": nn.Sequential(nn.Conv2d(in_channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2)),
            "mid": nn.Sequential(nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()),
            "up": nn.Sequential(nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU()),
            "head": nn.Linear(84, num_classes),
        }
        super().__init__(stages, levels=("low", "mid", "up"))
