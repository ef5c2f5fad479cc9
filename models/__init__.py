"""Models: WRN-d-k and LeNet-5 as splittable chains of stages."""

from models.lenet import LeNet5
from models.registry import build_model, parse_model_name
from models.split_model import NO_FREEZE, SplitModel
from models.wide_resnet import WideResNet

__all__ = ["NO_FREEZE", "LeNet5", "SplitModel", "WideResNet", "build_model", "parse_model_name"]
