"""A client's local objective: the loss its round trains θ with, and what the objective sees of the round.

The shared local update (``client_app/local_update.py``) trains with the plain cross-entropy unless the run's
``objective`` names another; methods bring theirs (FedProx's proximal term, MOON's contrastive loss) through their
``Method.objectives``, and the ClientApp hands the chosen factory to the round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from flwr.app import RecordDict

    from models import SplitModel
    from models.training import Forward
    from run_config import RunConfig


class Objective(Protocol):
    """A client's local training loss for one round."""

    def loss(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of one mini-batch (``inputs`` are what the round trains on: images, or φ's features)."""
        ...

    def finish(self) -> None:
        """After the round's training (e.g. keep the local model for the next round)."""
        ...


@dataclass
class LocalTraining:
    """What an objective sees when a client's round starts, before any step: the model and its trained part θ."""

    model: SplitModel
    level: str  # the split level; ``none``: the whole model is trained
    params: list[torch.nn.Parameter]  # θ
    forward: Forward  # θ's output for the round's inputs
    config: RunConfig
    node_state: RecordDict  # this node's ``context.state``, kept across rounds
    #: the round's inputs -> what θ reads (φ's output at ``level``, float32): the identity on cached features,
    #: φ itself on augmented images; ``forward(x)`` is ``model.forward_from(lower(x), level)``
    lower: Forward


class CrossEntropy:
    """The plain objective: cross-entropy of θ's output."""

    def __init__(self, training: LocalTraining) -> None:
        self.forward = training.forward

    def loss(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.forward(inputs), labels)

    def finish(self) -> None:
        """Nothing to keep."""


#: Builds a round's objective.
ObjectiveFactory = Callable[[LocalTraining], Objective]
