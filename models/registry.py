"""Model names understood by the ``model`` setting: ``wrn-<depth>-<width>``, ``lenet5``, ``resnet8``, ``mlp-2nn``."""

from __future__ import annotations

import re

from models.lenet import LeNet5
from models.mlp import MLP2NN
from models.resnet8 import ResNet8
from models.split_model import SplitModel
from models.wide_resnet import WideResNet

_WRN = re.compile(r"^wrn-(\d+)-(\d+)$")
MODEL_NAMES_HELP = (
    "'wrn-<depth>-<width>' with depth = 6n+4 (e.g. wrn-16-1, wrn-10-1), 'lenet5', "
    "'resnet8' (PreAct-ResNet-8, KAFAL's CIFAR model) or 'mlp-2nn' (784-200-200-C on the centre 28x28)"
)
_PLAIN_NAMES = ("lenet5", "resnet8", "mlp-2nn")


def parse_model_name(name: str) -> tuple[str, dict[str, int]]:
    """Split a model name into its family and arguments; raise ValueError for unknown names."""
    if name in _PLAIN_NAMES:
        return name, {}
    match = _WRN.match(name)
    if match:
        depth, width = int(match.group(1)), int(match.group(2))
        if depth >= 10 and (depth - 4) % 6 == 0 and width >= 1:
            return "wrn", {"depth": depth, "width": width}
    raise ValueError(f"unknown model {name!r}; expected {MODEL_NAMES_HELP}")


def build_model(name: str, in_channels: int, num_classes: int, dropout: float = 0.3) -> SplitModel:
    """Build a freshly initialised model by name."""
    family, args = parse_model_name(name)
    if family == "lenet5":
        return LeNet5(in_channels=in_channels, num_classes=num_classes)
    if family == "resnet8":
        return ResNet8(in_channels=in_channels, num_classes=num_classes)
    if family == "mlp-2nn":
        return MLP2NN(in_channels=in_channels, num_classes=num_classes)
    return WideResNet(in_channels=in_channels, num_classes=num_classes, dropout=dropout, **args)
