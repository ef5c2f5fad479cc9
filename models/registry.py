"""Model names understood by the ``model`` setting: ``wrn-<depth>-<width>`` and ``lenet5``."""

from __future__ import annotations

import re

from models.lenet import LeNet5
from models.split_model import SplitModel
from models.wide_resnet import WideResNet

_WRN = re.compile(r"^wrn-(\d+)-(\d+)$")
MODEL_NAMES_HELP = "'wrn-<depth>-<width>' with depth = 6n+4 (e.g. wrn-16-1, wrn-10-1) or 'lenet5'"


def parse_model_name(name: str) -> tuple[str, dict[str, int]]:
    """Split a model name into its family and arguments; raise ValueError for unknown names."""
    if name == "lenet5":
        return "lenet5", {}
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
    return WideResNet(in_channels=in_channels, num_classes=num_classes, dropout=dropout, **args)
