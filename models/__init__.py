"""Models: WRN-d-k, LeNet-5, PreAct-ResNet-8 and the 2NN MLP as splittable chains of stages."""

from models.lenet import LeNet5
from models.mlp import MLP2NN
from models.registry import build_model, parse_model_name
from models.resnet8 import ResNet8
from models.split_model import NO_FREEZE, ClassifierHead, SplitModel
from models.wide_resnet import WideResNet

__all__ = [
    "MLP2NN",
    "NO_FREEZE",
    "ClassifierHead",
    "LeNet5",
    "ResNet8",
    "SplitModel",
    "WideResNet",
    "build_model",
    "parse_model_name",
]
