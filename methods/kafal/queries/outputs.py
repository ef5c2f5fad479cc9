"""What a model says about a set of samples, computed in batches without gradient: logits and embeddings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from models.split_model import SplitModel


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for a model without parameters)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """Eval mode (BatchNorm running statistics, no dropout) for the block; the previous mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@dataclass(frozen=True)
class ModelOutputs:
    """Logits (N x C) and penultimate embeddings (N x D) on the model's device."""

    logits: torch.Tensor
    embeddings: torch.Tensor


@torch.no_grad()
def collect_outputs(model: SplitModel, inputs: torch.Tensor, batch_size: int = 256) -> ModelOutputs:
    """Logits and embeddings of ``inputs`` (any device) in eval mode, batch by batch on the model's device."""
    device = model_device(model)
    logits, embeddings = [], []
    with evaluating(model):
        for start in range(0, len(inputs), batch_size):
            embedding, logit = model.embed_and_classify(inputs[start : start + batch_size].to(device))
            logits.append(logit)
            embeddings.append(embedding)
    if not logits:
        raise ValueError("no inputs to score")
    return ModelOutputs(torch.cat(logits), torch.cat(embeddings))
