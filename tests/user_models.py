"""Models a user might bring (``model = "tests.user_models:<factory>"``), for the tests of ``models/user_model.py``."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    """Two convolutional blocks, global pooling and a classifier of ``classes`` outputs."""

    def __init__(self, channels: int = 3, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.block = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(self.features(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))


def small_cnn() -> nn.Module:
    """A 3-channel CNN with a 10-class classifier (the data's classes replace it)."""
    return SmallCNN()


def grey_small_cnn() -> nn.Module:
    return SmallCNN(channels=1)


class Residual(SmallCNN):
    """Reads the input again after ``features``: a skip connection across it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(self.features(x)) + x.mean()
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))


def residual() -> nn.Module:
    return Residual()


def not_a_module() -> str:
    return "a model"
