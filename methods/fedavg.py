"""FedAvg (McMahan et al. 2017) and FedAvg-RDS (the FedFT-EDS paper's baseline): the whole model trained on all, or
on a random ``selection-fraction``, of the local data; the shared client and server steps."""

from __future__ import annotations

from methods.base import Method

FEDAVG = Method(
    "fedavg",
    'FedAvg: the whole model, all local data (with `pretrain = "none"`: FedAvg w/o pretraining).',
    presets={"pretrain-round": True, "freeze": "none", "data-selection": "all", "selection-fraction": 1.0},
)
FEDAVG_RDS = Method(
    "fedavg-rds",
    "FedAvg on a random 10% of the local data, redrawn every round.",
    presets={"pretrain-round": True, "freeze": "none", "data-selection": "random", "selection-fraction": 0.1},
)
METHODS = (FEDAVG, FEDAVG_RDS)
