"""FedSplit's server step on the metadata (thesis §6.2.3, eq. 6.5, Alg. 5 lines 12-16), in pure torch.

The union of the clients' metadata D_meta^t trains the upper part θ of a model (the stages above the metadata level
l) **from scratch**: from the same fresh initialisation θ_g^ini every round, never from the previous round's θ.
The composed model the thesis evaluates is {θ_meta^t, φ_g^t}: θ_meta^t above l, and below it φ_g^t, the lower part
of the global model the clients extracted their maps with (the one sent in round t, not the FedAvg result that
round produces). Only θ's stages run during meta-training, so φ's weights and BatchNorm statistics cannot move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from models.batchnorm import settle_batchnorm
from models.split_model import SplitModel
from models.training import cross_entropy_of, train_epochs
from strategies.partial_model import merge_state, split_state


@dataclass(frozen=True)
class MetaTraining:
    """SGD on the metadata (thesis: lr 0.1, 100 epochs; batch size not given)."""

    epochs: int
    learning_rate: float
    batch_size: int


def meta_train(
    model: SplitModel,
    level: str,
    feature_maps: torch.Tensor,
    labels: torch.Tensor,
    training: MetaTraining,
    generator: torch.Generator,
) -> float:
    """θ_meta (eq. 6.5): train ``model``'s stages above ``level`` in place on (feature maps, labels), by plain SGD
    from their current weights; return the mean training loss. The stages up to ``level`` are neither run nor
    optimised; θ's BatchNorm statistics end settled on the maps (``models/batchnorm.py``). Maps and labels must be
    on the model's device."""
    model.train()
    params = model.upper_parameters(level)
    upper = lambda h: model.forward_from(h, level)  # noqa: E731
    loss = train_epochs(
        cross_entropy_of(upper),
        params,
        feature_maps,
        labels,
        epochs=training.epochs,
        batch_size=training.batch_size,
        lr=training.learning_rate,
        generator=generator,
    )
    settle_batchnorm(model, feature_maps, forward=upper, within=model.upper_stages(level))
    return loss


def compose(
    global_state: Mapping[str, torch.Tensor], meta_state: Mapping[str, torch.Tensor], upper_keys: Sequence[str]
) -> dict[str, torch.Tensor]:
    """{θ_meta, φ_g}: the entries of ``upper_keys`` (θ: parameters and buffers above the level) from the
    meta-trained model, every other entry from the global model; in the global state's order."""
    phi, _ = split_state(global_state, upper_keys)
    _, theta = split_state(meta_state, upper_keys)
    return merge_state(phi, theta, global_state.keys())
