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
from server_app.checkpoint import CHECKPOINT_FILE, Checkpoint, CheckpointError, checkpointing, resume_point, save_checkpoint
from server_app.pretraining import check_source, initial_state
from server_app.results import RunRecorder, run_directory
from strategies.client_population import ClientPopulation
from strategies.cohort_fedavg import SelectCohort
from strategies.fedentopt_selection import FedEntOptSelector, buffer_capacity
from strategies.label_counts import LabelCountRegistry
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.partial_model import merge_state, split_state
from strategies.random_selection import cohort_size, select_random
from strategies.robust_aggregation import AggregationSettings, settings_problem
from strategies.stragglers import straggler_count

torch.set_flush_denormal(True)  # see client_app/app.py

app = ServerApp()


class RunSetupError(RuntimeError):
    """The run cannot start; the message says why."""


def delivering_clients(config: RunConfig, num_clients: int) -> int:
    """The clients selected each round that do not drop out as stragglers."""
    per_round = cohort_size(num_clients, config.fraction_train)
    return per_round - straggler_count(per_round, config.straggler_fraction)


def aggregation_settings(config: RunConfig, num_clients: int) -> AggregationSettings:
    """The configured ``aggregation`` rule, checked against the updates a round delivers (Krum needs n ≥ 2f + 3,
    Bulyan n ≥ 4f + 3, a trimmed mean must trim someone); impossible settings raise ConfigError naming the key."""
    settings = AggregationSettings(config.aggregation, config.clip_multiple, config.weight_cap_multiple,
                                   config.trim_fraction, config.byzantine_clients)
    problem = settings_problem(settings, delivering_clients(config, num_clients))
    if problem:
        raise ConfigError(f"{problem} ({num_clients} clients, fraction-train {config.fraction_train}, "
                          f"straggler-fraction {config.straggler_fraction})")
    return settings


def cohort_policy(config: RunConfig, label_counts: LabelCountRegistry, num_clients: int) -> SelectCohort:
    """The configured client selection; FedEntOpt's buffer is checked against the population (0 < Q ≤ K − M)."""

    def size(num_available: int) -> int:
        return cohort_size(num_available, config.fraction_train)

    per_round = size(num_clients)
    delivering = delivering_clients(config, num_clients)
    if delivering < config.min_train_nodes:
        raise ConfigError(
            f"run config 'min-train-nodes' = {config.min_train_nodes} exceeds the {delivering} clients that deliver "
            f"each round ({num_clients} clients, fraction-train {config.fraction_train}, straggler-fraction "
            f"{config.straggler_fraction}): every round would be skipped"
        )

    if config.client_selection == "random":
        return lambda available, server_round: select_random(available, size(len(available)), config.seed, server_round)
    capacity = buffer_capacity(config.fedentopt_buffer, num_clients)
    if not 0 < capacity <= num_clients - per_round:
        raise ConfigError(
            f"run config 'fedentopt-buffer' = {config.fedentopt_buffer} gives a buffer of Q = {capacity} clients; "
            f"it must hold 1 to K − M = {num_clients - per_round} ({num_clients} clients, {per_round} per round)"
        )
    return FedEntOptSelector(label_counts.counts, size, capacity, config.seed)


def learning_rate_schedule(config: RunConfig):
    """Round t trains with learning-rate · lr-decay^(t−1) (FedEntOpt's paper decays by 0.98 per round)."""
    return lambda server_round: {"learning-rate": config.learning_rate * config.lr_decay ** (server_round - 1)}


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
        aggregation = aggregation_settings(config, population.expected)
        directory = run_directory(config)
        checkpoint = resume_point(directory, config)
        recorder = RunRecorder(directory, config, resume_from=checkpoint.results if checkpoint else None)
        state = checkpoint.model if checkpoint else initial_state(config)
        order = list(state)
        frozen, trained = split_state(state, build_model_for(config).upper_state_keys(config.freeze))
        label_counts = LabelCountRegistry(split.info.num_classes, noisy=config.label_dp_epsilon > 0)
        select = cohort_policy(config, label_counts, population.expected)
        if checkpoint and checkpoint.selection:
            select.load_state_dict(checkpoint.selection)
    except (ConfigError, CheckpointError, DataNotFoundError, DataFormatError, PartitioningError) as err:
        log(ERROR, "cannot start the run: %s", err)
        raise RunSetupError(str(err)) from None
    done = checkpoint.server_round if checkpoint else 0
    log(INFO, "%d clients connected; partition sizes %s", num_clients, sizes)
    log(INFO, "method %s: freeze %s, data-selection %s (P_ds %.2f), client-selection %s; θ has %d of %d arrays",
        config.method, config.freeze, config.data_selection, config.selection_fraction, config.client_selection,
        len(trained), len(order))
    log(INFO, "aggregation %s", aggregation)
    if done:
        log(INFO, "resuming after round %d of %d from %s", done, config.num_server_rounds, directory / CHECKPOINT_FILE)

    strategy = PartialModelFedAvg(
        frozen=ArrayRecord(frozen),
        population=population,
        label_counts=label_counts,
        select=select,
        observer=recorder,
        round_config=learning_rate_schedule(config),
        fraction_evaluate=config.fraction_evaluate,
        min_train_nodes=config.min_train_nodes,
        straggler_fraction=config.straggler_fraction,
        seed=config.seed,
        aggregation=aggregation,
    )
    strategy.resumed_after = done

    def save(server_round: int, arrays: ArrayRecord) -> None:
        model = merge_state(frozen, arrays.to_torch_state_dict(), order)
        selection = select.state_dict() if hasattr(select, "state_dict") else {}
        checkpoint = Checkpoint(server_round, model, selection, recorder.state(), config.to_dict())
        save_checkpoint(directory / CHECKPOINT_FILE, checkpoint)

    evaluate_fn = checkpointing(make_central_evaluation(config, frozen, recorder.evaluated), done, save)
    arrays = ArrayRecord(trained)
    if done < config.num_server_rounds:
        result = strategy.start(
            grid=grid,
            initial_arrays=arrays,
            num_rounds=config.num_server_rounds - done,
            timeout=config.round_timeout,
            train_config=ConfigRecord(),
            evaluate_fn=evaluate_fn,
        )
        arrays = result.arrays if len(result.arrays) else arrays  # empty when every round was skipped
    recorder.write_label_counts(label_counts.as_json())
    recorder.finish(merge_state(frozen, arrays.to_torch_state_dict(), order))
