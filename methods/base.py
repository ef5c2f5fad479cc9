"""What a federated method is, to this app: a ``Method`` (name, presets, settings, client step, server step) and the
``Objective`` it may train with.

The shared machinery does everything methods have in common: the ServerApp's lifecycle (settings, pretraining,
rounds, evaluation, results, checkpoints; ``server_app/lifecycle.py``), cohorts by partition id and the checks on
every reply (``strategies/cohort_fedavg.py``, ``protocol/``), and the client's round (data, frozen features, data
selection, SGD; ``client_app/local_update.py``). A method says only what differs:

- ``presets``: its values of the composable axes (``freeze``, ``data-selection``, ``selection-fraction``,
  ``objective``), which the run config's ``"auto"`` keys take;
- ``settings``: dataclasses declaring its own settings (``run_config.settings.setting``);
- ``objectives``: local objectives it brings (FedProx's proximal term, MOON's contrastive loss), selectable by any
  method through the ``objective`` setting;
- ``client_train`` / ``strategy``: its client step and its server step (a Flower ``Strategy``), when the shared
  ones (the local update; ``PartialModelFedAvg``) do not fit;
- ``queries``: messages its server sends besides training (KAFAL's end-of-cycle query);
- ``check``: what its settings must satisfy together (a level the model lacks, a size larger than the model's
  features), and against the clients' data at start;
- ``check_run``: checks that need the population's size (the custom-size methods' client architectures, one per
  client), run when the run starts (a refused value stops the run before any training, naming the key).

Client selection (``client-selection``) and the aggregation rule (``aggregation``) are axes of the shared server
step, so every method composes with FedEntOpt and the robust rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

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


@dataclass(frozen=True)
class Method:
    """A method: its name, what it sets, what it declares, and its client and server steps where they differ from
    the shared ones (None: shared)."""

    name: str
    summary: str
    presets: Mapping[str, Any] = field(default_factory=dict)
    settings: tuple[type, ...] = ()
    objectives: Mapping[str, ObjectiveFactory] = field(default_factory=dict)
    client_train: Any = None  # (Node, Message) -> RecordDict, or None: the shared step (client_app/train_step.py)
    strategy: Any = None  # (FederatedRun) -> Strategy, or None: PartialModelFedAvg (server_app/lifecycle.py)
    #: Queries the method's server sends besides training (message type "query.<name>" -> the client's answer,
    #: a (Node, Message) -> RecordDict); declare their records in protocol/messages.py.
    queries: Mapping[str, Any] = field(default_factory=dict)
    #: Checks of the settings that only this method needs, a (RunConfig, client sizes or None) -> None raising
    #: ``ConfigError``: called with None whenever a configuration is parsed, and at the run's start with the samples
    #: each connected client holds (partition id -> count).
    check: Any = None
    #: (RunConfig, number of clients in the population) -> None, raising ConfigError naming the key; run at start.
    check_run: Any = None
    paper: str = ""
