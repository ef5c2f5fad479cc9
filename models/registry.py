"""Model names understood by the ``model`` setting: ``wrn-<depth>-<width>``, ``lenet5``, ``resnet8``, ``mlp-2nn``, or
a user's own, ``package.module:factory`` (``models/user_model.py``)."""

from __future__ import annotations

import re

from models.lenet import LeNet5
from models.mlp import MLP2NN
from models.resnet8 import ResNet8
from models.split_model import SplitModel
from models.user_model import USER_MODEL_HELP, build_user_model, is_user_model
from models.wide_resnet import WideResNet

_WRN = re.compile(r"^wrn-(\d+)-(\d+)$")
MODEL_NAMES_HELP = (
    "'wrn-<depth>-<width>' with depth = 6n+4 (e.g. wrn-16-1, wrn-10-1), 'lenet5', "
    "'resnet8' (PreAct-ResNet-8, KAFAL's CIFAR model), 'mlp-2nn' (784-200-200-C on the centre 28x28) or "
    f"{USER_MODEL_HELP}"
)
_PLAIN_NAMES = ("lenet5", "resnet8", "mlp-2nn")


def parse_model_name(name: str) -> tuple[str, dict[str, int]]:
    """Split a model name into its family and arguments (a user's factory: ``user``); raise ValueError for unknown
    names."""
    if is_user_model(name):
        return "user", {}
    if name in _PLAIN_NAMES:
        return name, {}
    match = _WRN.match(name)
    if match:
        depth, width = int(match.group(1)), int(match.group(2))
        if depth >= 10 and (depth - 4) % 6 == 0 and width >= 1:
            return "wrn", {"depth": depth, "width": width}
    raise ValueError(f"unknown model {name!r}; expected {MODEL_NAMES_HELP}")


def build_model(name: str, in_channels: int, num_classes: int, dropout: float = 0.3, phi_end: str = "") -> SplitModel:
    """Build a freshly initialised model by name (a user's factory: wrapped, split at ``phi_end``; its input channels
    are its own)."""
    family, args = parse_model_name(name)
    if family == "user":
        return build_user_model(name, num_classes, phi_end)
    if family == "lenet5":
        return LeNet5(in_channels=in_channels, num_classes=num_classes)
    if family == "resnet8":
        return ResNet8(in_channels=in_channels, num_classes=num_classes)
    if family == "mlp-2nn":
        return MLP2NN(in_channels=in_channels, num_classes=num_classes)
    return WideResNet(in_channels=in_channels, num_classes=num_classes, dropout=dropout, **args)
