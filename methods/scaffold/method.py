"""SCAFFOLD (Karimireddy et al., ICML 2020, "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning",
Algorithm 1 with option II): FedAvg whose local steps are corrected by control variates, c on the server and c_i on
each client, so that each client's update drifts less toward its own optimum on non-IID data. It has no settings of
its own; its presets are FedAvg's (the whole model, all local data). See docs/methods/scaffold.md."""

from __future__ import annotations

from logging import INFO
from typing import TYPE_CHECKING

import torch
from flwr.common.logger import log

from methods.base import Method
from methods.scaffold.client_step import scaffold_train
from methods.scaffold.control import control_keys, zero_control
from methods.scaffold.strategy import ScaffoldFedAvg
from run_config import build_model_for

if TYPE_CHECKING:
    from server_app.lifecycle import FederatedRun
    from strategies.cohort_fedavg import CohortFedAvg


def scaffold_strategy(run: FederatedRun) -> CohortFedAvg:
    """The shared strategy with c = 0 over θ's parameters (Alg. 1 line 1)."""
    config = run.config
    with torch.random.fork_rng(devices=[]):  # building a model draws initial weights: keep the run's generator
        model = build_model_for(config)
    keys = control_keys(model, model.upper_state_keys(config.freeze))
    if config.momentum:
        log(INFO, "scaffold: local steps are plain SGD; momentum = %s is not used", config.momentum)
    return ScaffoldFedAvg(control=zero_control(run.trained, keys), **run.strategy_arguments())


#: η_l: SCAFFOLD's local steps at the app's 0.1 let a client's control variate run away (docs/methods/scaffold.md,
#: experiments/scaffold_seeds.yaml); the paper tunes η_l per setting, and its Theorem III bounds it by 1/(β K η_g).
SCAFFOLD_LEARNING_RATE = 0.03
SCAFFOLD = Method(
    "scaffold",
    "SCAFFOLD: FedAvg with control variates correcting client drift (option II; plain local SGD at lr 0.03, "
    "uniform mean).",
    presets={
        "freeze": "none",
        "data-selection": "all",
        "selection-fraction": 1.0,
        "learning-rate": SCAFFOLD_LEARNING_RATE,
    },
    client_train=scaffold_train,
    strategy=scaffold_strategy,
    paper="Karimireddy et al. 2020 (SCAFFOLD), Algorithm 1, option II",
)
METHODS = (SCAFFOLD,)
