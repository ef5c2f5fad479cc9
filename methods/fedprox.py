"""FedProx (Li et al. 2020): the local loss plus μ/2·‖w − w_t‖² over the trained parameters, w_t the parameters the
round started from. The proximal term is an objective (``objective = "proximal"``), so it composes with any method:
``fedprox`` is FedAvg with it, ``fedprox-rds`` FedAvg-RDS with it, and ``method="fedft-eds" objective="proximal"``
is FedFT-EDS with it. The FedFT-EDS paper tunes μ over {0.01, 0.1, 1, 5} without a reported winner; the default is
0.01."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from client_app.objective import CrossEntropy, LocalTraining
from methods.base import Method
from run_config.settings import non_negative, setting


@dataclass(frozen=True)
class FedProxSettings:
    NAMESPACE: ClassVar[str] = "fedprox"

    proximal_mu: float = setting(
        0.01, 'FedProx μ of `objective = "proximal"`: adds μ/2·‖w − w_t‖² over the trained parameters.', non_negative
    )


def proximal_term(params: Sequence[torch.Tensor], anchors: Sequence[torch.Tensor]) -> torch.Tensor:
    """½‖w − w_t‖² summed over the trained parameters (FedProx multiplies it by μ)."""
    return 0.5 * functools.reduce(operator.add, [((p - a) ** 2).sum() for p, a in zip(params, anchors, strict=True)])


class Proximal(CrossEntropy):
    """Cross-entropy + μ/2·‖w − w_t‖², w_t the trained parameters when the round starts."""

    def __init__(self, training: LocalTraining) -> None:
        super().__init__(training)
        self.mu = training.config.settings(FedProxSettings).proximal_mu
        self.params = training.params
        self.anchors = [p.detach().clone() for p in training.params]

    def loss(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return super().loss(inputs, labels) + self.mu * proximal_term(self.params, self.anchors)


FEDPROX = Method(
    "fedprox",
    "FedProx: FedAvg with the proximal term (μ = `fedprox.proximal-mu`).",
    presets={"pretrain-round": True, "freeze": "none", "data-selection": "all", "objective": "proximal"},
    settings=(FedProxSettings,),
    objectives={"proximal": Proximal},
)
FEDPROX_RDS = Method(
    "fedprox-rds",
    "FedProx on a random 10% of the local data, redrawn every round.",
    presets={
        "pretrain-round": True,
        "freeze": "none",
        "data-selection": "random",
        "selection-fraction": 0.1,
        "objective": "proximal",
    },
)
METHODS = (FEDPROX, FEDPROX_RDS)
