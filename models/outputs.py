"""Intermediate outputs of a SplitModel that the thesis methods read (thesis Ch. 5 and 6).

MOON and FedFSC read the vector entering the final Linear layer (the 64-d pooled feature of a WRN), through
``SplitModel.embed_and_classify``; FedAT, FedKAD and FedSplit read the feature maps at the split levels
``low``/``mid``/``up``. These helpers take them from our models without knowing the architecture, in one forward
pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from models.split_model import SplitModel


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Run a block with every module in eval mode (BN running stats, no dropout); restore each module's mode after."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training


def forward_with_maps(
    model: SplitModel, x: torch.Tensor, levels: Sequence[str]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The logits and the feature maps at each of ``levels`` (outputs of those stages), from one forward pass."""
    unknown = [level for level in levels if level not in model.levels]
    if unknown:
        raise ValueError(f"unknown levels {unknown}; this model has {', '.join(model.levels)}")
    maps: dict[str, torch.Tensor] = {}
    for name, stage in model.stages.items():
        x = stage(x)
        if name in levels:
            maps[name] = x
    return x, maps


@torch.no_grad()
def feature_map_shapes(
    model: SplitModel, input_shape: Sequence[int], levels: Sequence[str]
) -> dict[str, tuple[int, ...]]:
    """Per-sample shape (C, H, W for convolutional stages) of the output at each level for inputs of ``input_shape``.

    Runs two zero samples in eval mode on the model's device, so no BatchNorm statistics change.
    """
    device = next(model.parameters()).device
    with eval_mode(model):
        _, maps = forward_with_maps(model, torch.zeros(2, *input_shape, device=device), levels)
    return {level: tuple(maps[level].shape[1:]) for level in levels}


@torch.no_grad()
def extract_in_batches(model: SplitModel, inputs: torch.Tensor, level: str, batch_size: int) -> torch.Tensor:
    """φ's output at ``level`` for every input, in eval mode (the thesis's feature maps / metadata extraction)."""
    with eval_mode(model):
        return torch.cat(
            [model.forward_to(inputs[i : i + batch_size], level) for i in range(0, len(inputs), batch_size)]
        )


@torch.no_grad()
def penultimate_features(model: SplitModel, inputs: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The input of the final Linear layer for every input (``SplitModel.embed_and_classify``), in eval mode, a
    batch at a time: FedFSC's frozen few-shot features."""
    with eval_mode(model):
        return torch.cat(
            [model.embed_and_classify(inputs[i : i + batch_size])[0] for i in range(0, len(inputs), batch_size)]
        )
