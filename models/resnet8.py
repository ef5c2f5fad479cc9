"""PreAct-ResNet-8, KAFAL's CIFAR model (Cao et al., Sec. 4: "ResNet-8 [He et al., Identity mappings]").

A CIFAR ResNet with one residual block per group (depth 6·1 + 2 = 8):

    stem conv3x3 (in -> 16) -> low: block 16 (32x32) -> mid: block 32, stride 2 (16x16)
    -> up: block 64, stride 2 (8x8) -> head: BN -> ReLU -> global average pool -> Linear(64 -> C)

With the default pre-activation block (BN-ReLU-conv3x3-BN-ReLU-conv3x3, projection shortcut reading the
pre-activated input) this is WRN-10-1 without dropout (same state-dict keys): 77,850 parameters for 3 channels
and 10 classes, the paper's "0.078M".

``block="post"`` reproduces what the authors' script actually builds: its ``preact_resnet8_cifar`` puts the
post-activation ``BasicBlock`` (conv-BN-ReLU-conv-BN, add, ReLU; 1x1-conv shortcut without BN) inside the
pre-activation network (stem without BN, final BN-ReLU before pooling): 77,946 parameters, also "0.078M".
Initialisation follows the authors' code: conv weights N(0, 2 / (k²·out_channels)) (Kaiming, fan-out),
BatchNorm γ = 1, β = 0, the Linear layer PyTorch's default.

Split levels ``low``, ``mid``, ``up`` are the three groups' outputs (16x32x32, 32x16x16, 64x8x8), as in WRN;
``embed_and_classify`` gives the 64-d pooled penultimate features.
"""

from __future__ import annotations

import torch
from torch import nn

from models.split_model import SplitModel
from models.wide_resnet import PreActBlock, WideResNetHead

RESNET8_BLOCKS = ("preact", "post")


class PostActBlock(nn.Module):
    """The authors' ``BasicBlock``: conv3x3-BN-ReLU-conv3x3-BN, plus a shortcut (1x1 conv when the shape changes),
    then ReLU."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x if self.shortcut is None else self.shortcut(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + residual)


def _group(kind: str, in_ch: int, out_ch: int, stride: int) -> nn.Sequential:
    """A group of one block (a Sequential, so the pre-activation state dict is WRN-10-1's)."""
    if kind == "preact":
        return nn.Sequential(PreActBlock(in_ch, out_ch, stride, dropout=0.0))
    return nn.Sequential(PostActBlock(in_ch, out_ch, stride))


class ResNet8(SplitModel):
    """PreAct-ResNet-8 with split levels ``low``, ``mid`` and ``up``."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10, block: str = "preact") -> None:
        if block not in RESNET8_BLOCKS:
            raise ValueError(f"ResNet-8 block must be one of {', '.join(RESNET8_BLOCKS)}, got {block!r}")
        stages = {
            "stem": nn.Conv2d(in_channels, 16, 3, padding=1, bias=False),
            "low": _group(block, 16, 16, 1),
            "mid": _group(block, 16, 32, 2),
            "up": _group(block, 32, 64, 2),
            "head": WideResNetHead(64, num_classes),
        }
        super().__init__(stages, levels=("low", "mid", "up"))
        self.block = block
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
