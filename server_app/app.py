"""The ServerApp: validate the configuration, pretrain, wire the strategy, run it, write the results."""

from __future__ import annotations

from logging import ERROR, INFO

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from data.federated import partition_sizes
from data.file_formats import DataFormatError
from data.loading import DataNotFoundError
from data.partitioning import PartitioningError
from run_config import ConfigError, RunConfig, build_model_for, federated_split, parse_run_config
from server_app.central_evaluation import make_central_evaluation
from server_app.pretraining import check_source, initial_state
from server_app.results import RunRecorder, run_directory
from strategies.client_population import ClientPopulation
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.partial_model import merge_state, split_state
from strategies.random_selection import cohort_size, select_random

torch.set_flush_denormal(True)  # see client_app/app.py

app = ServerApp()


class RunSetupError(RuntimeError):
    """The run cannot start; the message says why."""


def _random_cohorts(config: RunConfig):
    def select(available: list[int], server_round: int) -> list[int]:
        return select_random(available, cohort_size(len(available), config.fraction_train), config.seed, server_round)

    return select


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run federated training as configured in ``[tool.flwr.app.config]``."""
    try:
        config = parse_run_config(context.run_config)
        check_source(config)
        split = federated_split(config)
        population = ClientPopulation(wait_seconds=config.node_wait_seconds)
        num_clients = len(population.available(grid))
        sizes = partition_sizes(split, population.expected)
        recorder = RunRecorder(run_directory(config), config)
        state = initial_state(config)
        order = list(state)
        frozen, trained = split_state(state, build_model_for(config).upper_state_keys(config.freeze))
        evaluate_fn = make_central_evaluation(config, frozen, recorder.evaluated)
    except (ConfigError, DataNotFoundError, DataFormatError, PartitioningError) as err:
        log(ERROR, "cannot start the run: %s", err)
        raise RunSetupError(str(err)) from None
    log(INFO, "%d clients connected; partition sizes %s", num_clients, sizes)
    log(INFO, "method %s: freeze %s, data-selection %s (P_ds %.2f); θ has %d of %d arrays",
        config.method, config.freeze, config.data_selection, config.selection_fraction, len(trained), len(order))

    strategy = PartialModelFedAvg(
        frozen=ArrayRecord(frozen),
        population=population,
        select=_random_cohorts(config),
        observer=recorder,
        fraction_evaluate=config.fraction_evaluate,
        seed=config.seed,
    )
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(trained),
        num_rounds=config.num_server_rounds,
        timeout=config.round_timeout,
        train_config=ConfigRecord({"learning-rate": config.learning_rate}),
        evaluate_fn=evaluate_fn,
    )
    recorder.finish(merge_state(frozen, result.arrays.to_torch_state_dict(), order))
