"""The ServerApp: validate the configuration, wire the strategy, run it, write the results."""

from __future__ import annotations

from logging import ERROR, INFO

import torch

from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from data.federated import partition_sizes
from data.loading import DataNotFoundError
from data.partitioning import PartitioningError
from run_config import ConfigError, build_model_for, federated_split, parse_run_config
from server_app.central_evaluation import make_central_evaluation
from server_app.results import RunRecorder, run_directory
from strategies.client_population import ClientPopulation
from strategies.cohort_fedavg import CohortFedAvg
from strategies.random_selection import cohort_size, select_random

torch.set_flush_denormal(True)  # see client_app/app.py

app = ServerApp()


class RunSetupError(RuntimeError):
    """The run cannot start; the message says why."""


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run federated training as configured in ``[tool.flwr.app.config]``."""
    try:
        config = parse_run_config(context.run_config)
        split = federated_split(config)
        recorder = RunRecorder(run_directory(config), config)
        evaluate_fn = make_central_evaluation(config, recorder.evaluated)
        population = ClientPopulation(wait_seconds=config.node_wait_seconds)
        num_clients = len(population.available(grid))
        sizes = partition_sizes(split, population.expected)
    except (ConfigError, DataNotFoundError, PartitioningError) as err:
        log(ERROR, "cannot start the run: %s", err)
        raise RunSetupError(str(err)) from None
    log(INFO, "%d clients connected; partition sizes %s", num_clients, sizes)

    strategy = CohortFedAvg(
        population=population,
        select=lambda available, rnd: select_random(
            available, cohort_size(len(available), config.fraction_train), config.seed, rnd
        ),
        observer=recorder,
        fraction_evaluate=config.fraction_evaluate,
    )
    model = build_model_for(config, seed=config.seed)
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(model.state_dict()),
        num_rounds=config.num_server_rounds,
        timeout=config.round_timeout,
        train_config=ConfigRecord({"learning-rate": config.learning_rate}),
        evaluate_fn=evaluate_fn,
    )
    recorder.finish(result.arrays.to_torch_state_dict())
