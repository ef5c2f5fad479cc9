"""Who runs a client's local SGD epochs: the client alone (always, on a SuperNode), or a cohort trainer that trains
the clients simulated in one process together (the in-process runner's ``--batched-cohorts``).

The shared local update (``client_app/local_update.py``) describes its epochs as a ``ClientJob`` and hands it to the
``EpochTrainer`` that ``EPOCH_TRAINER`` holds in the current context; the default trains alone with
``models.training.train_epochs``. A runner that simulates clients on threads sets its own in each client's thread.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from client_app.objective import Objective
from models import SplitModel, cohort_training
from models.cohort_training import ClientJob
from models.training import Forward


@dataclass(frozen=True)
class EpochsDone:
    """What a client's epochs gave: the mean training loss, and the seconds of the call that were not this client's
    work (waiting for the rest of its cohort; 0 when it trained alone)."""

    loss: float
    waited_seconds: float = 0.0


class EpochTrainer(Protocol):
    """Runs one client's epochs (``job``) under its ``objective``."""

    def __call__(self, job: ClientJob, objective: Objective) -> EpochsDone: ...


class ThetaForward(nn.Module):
    """θ's logits of the round's inputs as a module (what a cohort trainer calls functionally):
    ``model.forward_from(lower(x), level)``."""

    def __init__(self, model: SplitModel, level: str, lower: Forward) -> None:
        super().__init__()
        self.model = model
        self.level = level
        self.lower = lower

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.forward_from(self.lower(x), self.level)


def train_alone(job: ClientJob, objective: Objective) -> EpochsDone:
    """The client's epochs with ``train_epochs``, under any objective."""
    return EpochsDone(cohort_training.train_alone(job, objective.loss))


EPOCH_TRAINER: ContextVar[EpochTrainer] = ContextVar("epoch_trainer", default=train_alone)
