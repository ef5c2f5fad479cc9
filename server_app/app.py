"""The ServerApp: validate the configuration, pretrain, wire the strategy, run it, write the results."""

from __future__ import annotations

from contextlib import ExitStack
from logging import ERROR, INFO

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp
from flwr.supercore.exit import add_exit_handler

from client_app.data_selection import selection_size
from data.federated import partition_sizes
from data.file_formats import DataFormatError
from data.loading import DataNotFoundError
from data.partitioning import PartitioningError
from models.device import DeviceUnavailableError, resolve_device
from protocol.messages import LEARNING_RATE
from run_config import ConfigError, RunConfig, build_model_for, federated_split, parse_run_config
from run_config.population import aggregation_settings, check_population
from server_app.central_evaluation import make_central_evaluation
from server_app.checkpoint import CHECKPOINT_FILE, Checkpoint, CheckpointError, checkpointing, resume_point, save_checkpoint
from server_app.pretraining import check_source, initial_state, pretraining_report
from server_app.results import RunRecorder, run_directory
from server_app.run_errors import RunError, RunFailedError, RunSetupError, hide_tracebacks_of
from server_app.run_lock import RunFolderError, lock_run_folder
from strategies.client_population import ClientPopulation
from strategies.cohort_fedavg import SelectCohort
from strategies.fedentopt_selection import FedEntOptSelector, buffer_capacity
from strategies.label_counts import LabelCountRegistry
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.partial_model import merge_state, split_state
from strategies.random_selection import cohort_size, select_random

torch.set_flush_denormal(True)  # see client_app/app.py

app = ServerApp()


def cohort_policy(config: RunConfig, label_counts: LabelCountRegistry, num_clients: int) -> SelectCohort:
    """The configured client selection for ``num_clients`` clients (settings checked with ``check_population``)."""

    def size(num_available: int) -> int:
        return cohort_size(num_available, config.fraction_train)

    if config.client_selection == "random":
        return lambda available, server_round: select_random(available, size(len(available)), config.seed, server_round)
    return FedEntOptSelector(label_counts.counts, size, buffer_capacity(config.fedentopt_buffer, num_clients), config.seed)


def learning_rate_schedule(config: RunConfig):
    """Round t trains with learning-rate · lr-decay^(t−1) (FedEntOpt's paper decays by 0.98 per round)."""
    return lambda server_round: {LEARNING_RATE: config.learning_rate * config.lr_decay ** (server_round - 1)}


def expected_examples(config: RunConfig):
    """How many of its samples a client trains on: all of them, or ⌈P_ds·n⌉ under random or entropy selection.
    A reply that claims another count is refused (its weight would be a lie)."""
    if config.data_selection == "all":
        return lambda num_local: num_local
    return lambda num_local: selection_size(num_local, config.selection_fraction)


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run federated training as configured in ``[tool.flwr.app.config]``."""
    hide_tracebacks_of(RunError)
    with ExitStack() as held:
        federated_run(grid, context, held)


def federated_run(grid: Grid, context: Context, held: ExitStack) -> None:
    """The run; ``held`` keeps the run folder's lock until the run ends or fails."""
    try:
        config = parse_run_config(context.run_config)
        server_device = resolve_device(config.server_device, key="run config 'server-device'")
        directory = run_directory(config)
        held.enter_context(lock_run_folder(directory, config.results_dir, config.resume))
        check_source(config)
        split = federated_split(config)
        population = ClientPopulation(wait_seconds=config.node_wait_seconds)
        num_clients = len(population.available(grid))
        sizes = partition_sizes(split, population.expected)
        check_population(config, population.expected)  # before pretraining: an impossible run costs nothing
        aggregation = aggregation_settings(config)
        checkpoint = resume_point(directory, config)
        recorder = RunRecorder(directory, config, resume_from=checkpoint.results if checkpoint else None)
        state = checkpoint.model if checkpoint else initial_state(config, server_device)
        order = list(state)
        frozen, trained = split_state(state, build_model_for(config).upper_state_keys(config.freeze))
        label_counts = LabelCountRegistry(split.info.num_classes, noisy=config.label_dp_epsilon > 0)
        select = cohort_policy(config, label_counts, population.expected)
        if checkpoint and checkpoint.selection:
            select.load_state_dict(checkpoint.selection)
    except (ConfigError, CheckpointError, DataNotFoundError, DataFormatError, PartitioningError,
            DeviceUnavailableError, RunFolderError) as err:
        log(ERROR, "cannot start the run: %s", err)
        raise RunSetupError(str(err)) from None
    done = checkpoint.server_round if checkpoint else 0
    log(INFO, "%d clients connected; partition sizes %s; the server computes on %s", num_clients, sizes, server_device)
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
        expected_examples=expected_examples(config),
    )
    strategy.resumed_after = done

    def save(server_round: int, arrays: ArrayRecord) -> None:
        model = merge_state(frozen, arrays.to_torch_state_dict(), order)
        selection = select.state_dict() if hasattr(select, "state_dict") else {}
        checkpoint = Checkpoint(server_round, model, selection, recorder.state(), config.to_dict())
        save_checkpoint(directory / CHECKPOINT_FILE, checkpoint)

    evaluate_fn = checkpointing(make_central_evaluation(config, frozen, recorder.evaluated, server_device), done, save)
    arrays = ArrayRecord(trained)
    add_exit_handler(lambda: recorder.stopped("interrupted"))  # Flower stops a ServerApp on SIGTERM through these
    if done < config.num_server_rounds:
        try:
            result = strategy.start(
                grid=grid,
                initial_arrays=arrays,
                num_rounds=config.num_server_rounds - done,
                timeout=config.round_timeout,
                train_config=ConfigRecord(),
                evaluate_fn=evaluate_fn,
            )
        except Exception as err:
            recorder.stopped("failed", failure=f"{type(err).__name__}: {err}")
            raise
        except BaseException:
            recorder.stopped("interrupted")
            raise
        arrays = result.arrays if len(result.arrays) else arrays  # empty when every round was skipped
    recorder.write_label_counts(label_counts.as_json())
    summary = recorder.finish(merge_state(frozen, arrays.to_torch_state_dict(), order),
                              pretraining=pretraining_report(config))
    if summary["status"] == "failed":
        raise RunFailedError(f"no round aggregated an update: {summary['failure']}")
