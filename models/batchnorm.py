"""How every trained model's BatchNorm statistics are set: one rule for the start, every client and the server.

A BatchNorm layer normalises by its batch's statistics while training and by its running statistics when scored.
The running statistics that training leaves behind are not those the scored model sees: they lag the weights
(an exponential average over the last few steps), and WRN's blocks put Dropout(0.3) right before their second
BatchNorm, so those layers averaged the statistics of dropped-out inputs, whose variance is larger than that of the
inputs they normalise once dropout is off. Measured on this app (issue 31): two training-mode forward passes over
500 images, with no weight changed, took a 55.9% model to 37.5%.

The rule: whoever trains a model ends its training with ``settle_batchnorm`` on the data it trained on: the running
statistics become the exact statistics of that data, computed with the model as it is scored (dropout off).
Scoring (``eval()``) then never changes a model, so re-scoring an unchanged model gives the same accuracy, and the
pretrained start, every client's model, every round's aggregate (a weighted mean of settled statistics) and the
server's own models are scored the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

#: Inputs per forward pass when statistics are settled (the passes are of near-equal size: ``torch.tensor_split``).
SETTLE_BATCH_SIZE = 500


def batchnorm_layers(modules: Iterable[nn.Module]) -> list[_BatchNorm]:
    """Every BatchNorm layer inside ``modules``, once each, in module order."""
    seen: dict[int, _BatchNorm] = {}
    for module in modules:
        for layer in module.modules():
            if isinstance(layer, _BatchNorm) and layer.track_running_stats:
                seen.setdefault(id(layer), layer)
    return list(seen.values())


@torch.no_grad()
def settle_batchnorm(
    model: nn.Module,
    inputs: torch.Tensor,
    *,
    forward: Callable[[torch.Tensor], torch.Tensor] | None = None,
    within: Iterable[nn.Module] | None = None,
    batch_size: int = SETTLE_BATCH_SIZE,
) -> None:
    """Replace the running statistics of the BatchNorm layers ``within`` (default: all of ``model``) by the mean and
    variance of their inputs over ``inputs``, fed through ``forward`` (default: ``model``) with the model in eval mode:
    dropout off and every other BatchNorm normalising by its running statistics, as the model is scored.

    The layers take the cumulative average of near-equal passes (``torch.tensor_split`` into at most
    ``batch_size`` inputs each), each layer normalising by its pass's statistics as in training; a layer whose pass
    holds a single value per channel (BatchNorm1d on one input) cannot estimate a variance, and then every layer
    keeps the statistics it had. Nothing else changes, and the model's training flags are restored. With no inputs,
    nothing changes.
    """
    layers = batchnorm_layers([model] if within is None else within)
    if not layers or len(inputs) == 0:
        return
    flags = {module: module.training for module in model.modules()}
    saved = {layer: (layer.momentum, {k: v.clone() for k, v in layer.state_dict().items()}) for layer in layers}
    model.eval()
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None  # cumulative average over the passes below
        layer.train()
    run = forward or model
    try:
        for chunk in torch.tensor_split(inputs, -(-len(inputs) // batch_size)):
            run(chunk)
    except ValueError as err:  # one value per channel: BatchNorm cannot estimate a variance
        if "Expected more than 1 value per channel" not in str(err):
            raise
        for layer, (_, state) in saved.items():
            layer.load_state_dict(state)
    finally:
        for layer, (momentum, _) in saved.items():
            layer.momentum = momentum
        for module, training in flags.items():
            module.train(training)
