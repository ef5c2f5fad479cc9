"""Learning loss for active learning, LL4AL (Yoo & Kweon, CVPR 2019), as KAFAL's baseline (II).

A loss-prediction module reads the model's intermediate features (here the output of every split level: for
ResNet-8 the three groups, 16/32/64 channels), global-average-pools each, maps it with Linear(·, 128) + ReLU,
concatenates and regresses one number, the predicted loss. With ResNet-8 that is 15,105 parameters, the paper's
"0.015M". It is trained next to the model with the margin ranking loss of the reference code, which compares the
two halves of the batch (sample i with sample B−1−i):

    L_pred = mean_i max(0, ξ − sign(l_i − l_j) · (l̂_i − l̂_j)),   ξ = 1,  sign(0) counted as −1 (as there)

added to the task loss with weight λ = 1; the reference stops the gradient into the model after 120 of 200 epochs
(the caller detaches the features). The query takes the samples with the highest predicted loss.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from methods.kafal.ksas import top_scores
from methods.kafal.queries.outputs import evaluating, model_device
from models.split_model import SplitModel

LL4AL_HIDDEN = 128


def _pooled(features: torch.Tensor) -> torch.Tensor:
    """N x C from N x C x ... (global average over the trailing dimensions) or N x C as it is."""
    return features.flatten(2).mean(dim=2) if features.dim() > 2 else features


class LossPredictionModule(nn.Module):
    """GAP -> Linear(c_k, hidden) -> ReLU for each feature map, concatenated -> Linear(k·hidden, 1)."""

    def __init__(self, channels: Sequence[int], hidden: int = LL4AL_HIDDEN) -> None:
        super().__init__()
        self.branches = nn.ModuleList(nn.Linear(c, hidden) for c in channels)
        self.out = nn.Linear(len(channels) * hidden, 1)

    @classmethod
    def for_model(
        cls, model: SplitModel, input_shape: Sequence[int], hidden: int = LL4AL_HIDDEN
    ) -> LossPredictionModule:
        """A module sized for ``model``'s split-level outputs on inputs of ``input_shape`` (C x H x W), same device."""
        device = model_device(model)
        with torch.no_grad(), evaluating(model):
            _, levels = model.forward_with_levels(torch.zeros(1, *input_shape, device=device))
        return cls([f.shape[1] for f in levels.values()], hidden).to(device)

    def forward(self, features: Sequence[torch.Tensor]) -> torch.Tensor:
        if len(features) != len(self.branches):
            raise ValueError(f"expected {len(self.branches)} feature maps, got {len(features)}")
        hidden = [torch.relu(branch(_pooled(f))) for branch, f in zip(self.branches, features, strict=True)]
        return self.out(torch.cat(hidden, dim=1)).squeeze(1)


def loss_prediction_loss(predicted: torch.Tensor, target: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """The reference ``LossPredLoss`` (mean): margin ranking between sample i and sample B−1−i, i < B/2."""
    half = len(predicted) // 2
    if half == 0:
        return predicted.sum() * 0.0
    diff = (predicted - predicted.flip(0))[:half]
    target_diff = (target - target.flip(0))[:half].detach()
    sign = 2 * torch.sign(torch.clamp(target_diff, min=0)) - 1
    return torch.clamp(margin - sign * diff, min=0).sum() / half


@torch.no_grad()
def predicted_losses(
    model: SplitModel, module: LossPredictionModule, inputs: torch.Tensor, batch_size: int = 256
) -> torch.Tensor:
    """The module's predicted loss for every input (eval mode for both), on the model's device."""
    device = model_device(model)
    out = []
    with evaluating(model), evaluating(module):
        for start in range(0, len(inputs), batch_size):
            _, levels = model.forward_with_levels(inputs[start : start + batch_size].to(device))
            out.append(module(list(levels.values())))
    return torch.cat(out)


def ll4al_query(predicted: torch.Tensor, budget: int) -> torch.Tensor:
    """Positions (CPU) of the ``budget`` highest predicted losses, highest first."""
    return top_scores(predicted, budget)
