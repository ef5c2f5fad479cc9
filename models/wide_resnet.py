"""Pre-activation Wide ResNet WRN-d-k, CIFAR style (Zagoruyko & Komodakis 2016; the FedFT-EDS paper's model).

Convolutions carry no bias (the original WRN convention: every conv is followed by a BatchNorm that
has its own shift); the classifier Linear has one. With this convention WRN-16-1 on 3-channel input
and 10 classes has 175,066 parameters.

The network is a sequence of named stages so that FedFT can split it at a level:

    stem  -> group1 ("low", 16k x32x32) -> group2 ("mid", 32k x16x16) -> group3 ("up", 64k x8x8) -> head

Freezing at a level freezes every stage up to and including it (φ) and trains the rest (θ).
"""

from __future__ import annotations

import torch
from torch import nn

from models.split_model import ClassifierHead, SplitModel


class PreActBlock(nn.Module):
    """BN-ReLU-conv3x3-Dropout-BN-ReLU-conv3x3 plus a shortcut (1x1 conv when the shape changes)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, dropout: float) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride=1, padding=1, bias=False)
        self.shortcut: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = torch.relu(self.bn1(x))
        # As in the reference WRN code, a projection shortcut reads the pre-activated input.
        residual = x if self.shortcut is None else self.shortcut(pre)
        out = self.conv1(pre)
        out = self.conv2(torch.relu(self.bn2(self.dropout(out))))
        return out + residual


class WideResNetHead(ClassifierHead):
    """Final BN -> ReLU -> global average pool -> Linear; the pooled vector is the embedding."""

    def __init__(self, channels: int, num_classes: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, num_classes)

    def embed(self, h: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(h)).mean(dim=(2, 3))


def _group(in_ch: int, out_ch: int, blocks: int, stride: int, dropout: float) -> nn.Sequential:
    layers = [PreActBlock(in_ch, out_ch, stride, dropout)]
    layers += [PreActBlock(out_ch, out_ch, 1, dropout) for _ in range(blocks - 1)]
    return nn.Sequential(*layers)


class WideResNet(SplitModel):
    """WRN-depth-width with split levels ``low``, ``mid`` and ``up``."""

    def __init__(
        self,
        depth: int = 16,
        width: int = 1,
        in_channels: int = 3,
        num_classes: int = 10,
        dropout: float = 0.3,
    ) -> None:
        if depth < 10 or (depth - 4) % 6 != 0:
            raise ValueError(f"WRN depth must be 6n+4 with n >= 1, got {depth}")
        if width < 1:
            raise ValueError(f"WRN width must be >= 1, got {width}")
        n = (depth - 4) // 6
        widths = (16 * width, 32 * width, 64 * width)
        stages = {
            "stem": nn.Conv2d(in_channels, 16, 3, padding=1, bias=False),
            "low": _group(16, widths[0], n, 1, dropout),
            "mid": _group(widths[0], widths[1], n, 2, dropout),
            "up": _group(widths[1], widths[2], n, 2, dropout),
            "head": WideResNetHead(widths[2], num_classes),
        }
        super().__init__(stages, levels=("low", "mid", "up"))
        self.depth, self.width = depth, width
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)
