"""A federated run from start to finish, as a story in named steps.

1. ``FederatedRun.start``: validate the settings, lock the run folder, wait for the clients (pretraining or reading
   the checkpoint meanwhile, in the background), check the settings against them (and the method's own ``check``
   and ``check_run``), split the model into φ (frozen) and θ (trained).
2. ``FederatedRun.rounds``: first, where the run has one (``pretrain-round``) and has not done it yet, the
   pretraining round (``server_app/pretraining_round.py``: step 2 of the pretraining phase), whose output is split
   into φ and θ anew, recorded as round 0 and checkpointed; then the method's strategy (``Method.strategy``, by
   default ``PartialModelFedAvg``) runs the rounds with Flower's ``Strategy.start``. In each round it *selects* a
   cohort and *configures* the clients' messages (``configure_train``), *collects and validates* their replies and
   *aggregates* the sound ones (``aggregate_train``); then Flower calls ``end_of_round``, which *evaluates* the new
   global model, *records* the round and *checkpoints* the run, in that order.
3. ``FederatedRun.finish``: write the summary (its status: ``completed``, or ``failed`` when no round aggregated),
   the final model and the plot; a failed run raises so that its exit status says so.

Flower numbers the rounds of each ``start`` from 1; a resumed run goes on from ``first_round``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from logging import ERROR, INFO
from pathlib import Path
from typing import Any, Protocol

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.supercore.exit import add_exit_handler

from data.federated import describe_sizes, partition_sizes
from data.file_formats import DataFormatError
from data.loading import DataNotFoundError
from data.partitioning import PartitioningError
from data.sample_share import selection_size
from models.device import DeviceUnavailableError, compute_description, resolve_device
from models.fingerprint import state_fingerprint
from profiling.spans import CHECKPOINT, EVALUATION, FINISH, NODE_WAIT, PRETRAINING, RESULTS, SETUP, span
from protocol.messages import LEARNING_RATE
from run_config import ConfigError, RunConfig, build_model_for, data_cache, federated_split, parse_run_config
from run_config.catalogue import Catalogue
from run_config.data_check import check_data
from run_config.parsing import check_method
from server_app.background import Background
from server_app.checkpoint import CHECKPOINT_FILE, Checkpoint, CheckpointError, CheckpointWriter, resume_point
from server_app.pretraining import check_source, initial_state, pretraining_report
from server_app.pretraining_round import ROUND, PretrainingRoundError, run_pretraining_round
from server_app.result_files import ResultFile
from server_app.results import RunRecorder, run_directory
from server_app.run_errors import RunFailedError, RunSetupError, RunStopped
from server_app.run_lock import RunFolderError, lock_run_folder, remove_if_unused
from strategies.central_evaluation import CentralEvaluation, evaluates
from strategies.client_population import ClientPopulation, NoClientsError
from strategies.cohort_fedavg import CohortFedAvg, SelectCohort
from strategies.fedentopt_selection import FedEntOptSelector, buffer_capacity
from strategies.label_counts import LabelCountRegistry
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.partial_model import merge_state, split_state
from strategies.population_check import aggregation_settings, check_population
from strategies.random_selection import cohort_size, select_random

#: Errors that mean the run cannot start: reported in one line, naming the setting or file.
SETUP_ERRORS = (
    NoClientsError,
    ConfigError,
    CheckpointError,
    DataNotFoundError,
    DataFormatError,
    PartitioningError,
    DeviceUnavailableError,
    RunFolderError,
)


def cohort_policy(config: RunConfig, label_counts: LabelCountRegistry, num_clients: int) -> SelectCohort:
    """The configured client selection for ``num_clients`` clients (settings checked with ``check_population``)."""

    def size(num_available: int) -> int:
        return cohort_size(num_available, config.fraction_train)

    if config.client_selection == "random":
        return lambda available, server_round: select_random(available, size(len(available)), config.seed, server_round)
    return FedEntOptSelector(
        label_counts.counts, size, buffer_capacity(config.fedentopt_buffer, num_clients), config.seed
    )


#: How long a failed start waits for the pretraining it cancelled to stop (at its next mini-batch), so that the
#: ServerApp's process does not end with torch computing in a thread (which aborts the interpreter).
CANCEL_WAIT_SECONDS = 30.0


def _initial_model(
    config: RunConfig, device: torch.device, checkpoint: Checkpoint | None, stop: threading.Event
) -> dict[str, torch.Tensor]:
    """The model the rounds start from: the checkpoint's, else the pretrained (or cached, or initial) one."""
    with span(PRETRAINING):
        return checkpoint.model if checkpoint else initial_state(config, device, stop)


def learning_rate_schedule(config: RunConfig) -> Callable[[int], dict[str, Any]]:
    """Round t trains with learning-rate · lr-decay^(t−1) (FedEntOpt's paper decays by 0.98 per round)."""
    return lambda server_round: {LEARNING_RATE: config.learning_rate * config.lr_decay ** (server_round - 1)}


def expected_examples(config: RunConfig) -> Callable[[int], int | None]:
    """How many of its samples a client trains on: all of them, or ⌈P_ds·n⌉ under random or entropy selection.
    A reply that claims another count is refused (its weight would be a lie)."""
    if config.data_selection == "all":
        return lambda num_local: num_local
    return lambda num_local: selection_size(num_local, config.selection_fraction)


class StopRecord:
    """Records a stop of one run, whenever it comes after the run folder is locked: Flower runs it as an exit
    handler on SIGINT (how simulation/local_run.py stops a run), in the thread that got the signal, and the start
    calls it on Ctrl-C in its own thread. Before the run's recorder exists (loading the data, pretraining, the
    clients' start, the start checks) it writes config.json, an empty rounds.jsonl and summary.json saying
    ``interrupted`` with no rounds (``resume = true`` then starts afresh), unless the run resumes, which keeps the
    summary of the stop it resumes from; afterwards, the recorder's stop (the rounds it had checkpointed). It acts
    at most once, and not once disarmed (the start failed, or the run ended). It holds the recorder weakly: Flower
    keeps every handler for the life of the process, and a process that runs many runs (in-process experiment
    cells) would otherwise keep each run's model and data."""

    def __init__(self, directory: Path, config: RunConfig, device: torch.device, resumed: bool) -> None:
        self.directory, self.config, self.device, self.resumed = directory, config, device, resumed
        self.recorder: Callable[[], RunRecorder | None] | None = None
        self.armed = True
        #: Re-entrant: in a ServerApp that runs in the main thread, Flower's signal handler runs in the thread
        #: that may hold it.
        self.lock = threading.RLock()

    def take_over(self, recorder: RunRecorder) -> None:
        """From now on a stop is the recorder's. ``RunStopped`` if the stop came first (its summary is written):
        the run must not go on to record rounds beside it, in the moments before the engine ends the process."""
        with self.lock:
            if not self.armed:
                raise RunStopped("the run was stopped while it started")
            self.recorder = weakref.ref(recorder)

    def disarm(self) -> None:
        with self.lock:
            self.armed = False

    def __call__(self) -> None:
        with self.lock:
            if not self.armed:
                return
            self.armed = False
            if self.recorder is not None:
                if (recorder := self.recorder()) is not None:
                    recorder.stopped("interrupted")
            elif not self.resumed:
                machine = compute_description(self.device)
                RunRecorder(self.directory, self.config, machine=machine).stopped("interrupted")


class ServerSide(Protocol):
    """What the lifecycle runs of a method (``methods.base.Method`` is one): its server step, None for the shared
    one, its start checks that need the population's size, and its own result files."""

    @property
    def strategy(self) -> Callable[[FederatedRun], CohortFedAvg] | None: ...

    @property
    def check_run(self) -> Callable[[RunConfig, int], None] | None: ...

    @property
    def result_files(self) -> tuple[ResultFile, ...]: ...


@dataclass(frozen=True)
class RunMethods:
    """What the lifecycle needs of the methods, which the ServerApp reads from the method registry: the catalogue
    that settings are parsed against, each method's server side by name, and the other dataset a run's method
    draws on (its generic set), if any."""

    catalogue: Catalogue
    server_sides: Mapping[str, ServerSide]
    generic_dataset: Callable[[RunConfig], str | None]


@dataclass
class FederatedRun:
    """Everything a run holds between its start and its finish."""

    config: RunConfig
    method: ServerSide  # the configured method's server side
    device: torch.device  # where the server computes (pretraining, evaluation)
    directory: Path  # <results-dir>/<run-name>
    population: ClientPopulation
    label_counts: LabelCountRegistry
    select: SelectCohort
    recorder: RunRecorder
    frozen: dict[str, torch.Tensor]  # φ: never changes
    trained: dict[str, torch.Tensor]  # θ at the start (pretrained, or from the checkpoint)
    order: list[str]  # the model's state-dict keys
    first_round: int  # 1, or the round after the checkpoint's
    strategy_state: dict[str, Any]  # what the checkpoint kept of the strategy (empty when starting afresh)
    checkpoints: CheckpointWriter  # writes each round's checkpoint in the background
    pretraining_round_due: bool  # the run has a pretraining round and has not done it (a resumed run has)

    @classmethod
    def start(cls, grid: Grid, context: Context, held: ExitStack, methods: RunMethods) -> FederatedRun:
        """Step 1. ``held`` keeps the run folder's lock until the run ends; a setup error is one line."""
        with span(SETUP):
            return cls._start(grid, context, held, methods)

    @classmethod
    def _start(cls, grid: Grid, context: Context, held: ExitStack, methods: RunMethods) -> FederatedRun:
        record_stop: StopRecord | None = None
        try:
            config = parse_run_config(context.run_config, methods.catalogue)
            method = methods.server_sides[config.method]
            device = resolve_device(config.server_device, key="run config 'server-device'")
            directory = run_directory(config)
            created = not directory.exists()
            held.enter_context(lock_run_folder(directory, config.results_dir, config.resume))
            log(
                INFO, "results go to %s (a stopped run goes on with run-name=%r resume=true)", directory, directory.name
            )
            resumed = config.resume and (directory / CHECKPOINT_FILE).exists()
            record_stop = StopRecord(directory, config, device, resumed=resumed)
            add_exit_handler(record_stop)
            held.callback(record_stop.disarm)
            if created:  # runs before the lock is released: a run refused at start leaves no empty folder
                held.callback(remove_if_unused, directory)
            check_source(config)
            for line in check_data(config, methods.generic_dataset(config)):
                log(INFO, "%s", line)
            split = federated_split(config)
            checkpoint = resume_point(directory, config)
            # Pretraining overlaps the clients' start (Ray, their imports, their data). The population check needs
            # the clients' answers, so it comes after: an impossible run is refused as soon as they have answered,
            # as before, and its pretraining is cancelled (at its next mini-batch) when the start fails.
            initial = Background(lambda stop: _initial_model(config, device, checkpoint, stop), "pretraining")
            held.callback(initial.cancel, CANCEL_WAIT_SECONDS)  # a no-op once it is done
            population = ClientPopulation(wait_seconds=config.node_wait_seconds)
            with span(NODE_WAIT):  # a failed pretraining ends the wait at once (initial.check)
                connected = population.available(grid, while_waiting=initial.check)
            sizes = partition_sizes(split, population.expected, data_cache(config))
            check_population(config, population.expected)  # before any round: an impossible run stops here
            # The methods' start checks may build models, drawing from torch's global generator, which the
            # pretraining thread seeds and draws from (initial weights, dropout): they wait for it, so that a run's
            # initial model does not depend on thread timing.
            state = initial.result()
            check_method(
                config, {pid: population.identity_of(pid).num_examples for pid in connected}, methods.catalogue
            )
            if (check_run := method.check_run) is not None:
                check_run(config, population.expected)
            checkpoints = CheckpointWriter(directory / CHECKPOINT_FILE)
            recorder = RunRecorder(
                directory,
                config,
                resume_from=checkpoint.results if checkpoint else None,
                machine=compute_description(device),
                files=method.result_files,
                settle_checkpoint=checkpoints.settle,
            )
            record_stop.take_over(recorder)
            frozen, trained = split_state(state, build_model_for(config).upper_state_keys(config.freeze))
            label_counts = LabelCountRegistry(split.info.num_classes, noisy=config.label_dp_epsilon > 0)
            select = cohort_policy(config, label_counts, population.expected)
            if checkpoint and checkpoint.selection:
                select.load_state_dict(checkpoint.selection)  # type: ignore[attr-defined]
        except KeyboardInterrupt:  # Ctrl-C in this thread (an in-process run): recorded as in the engine
            if record_stop is not None:
                record_stop()
            raise
        except BaseException as err:  # the run does not start: a stop from here on has nothing to record
            if record_stop is not None:
                record_stop.disarm()
            if isinstance(err, SETUP_ERRORS):
                log(ERROR, "cannot start the run: %s", err)
                raise RunSetupError(str(err)) from None
            raise
        log(
            INFO,
            "%d clients connected; partition sizes %s; the server computes on %s",
            len(connected),
            describe_sizes(sizes),
            device,
        )
        log(
            INFO,
            "method %s: freeze %s, data-selection %s (P_ds %.2f), objective %s, client-selection %s, "
            "aggregation %s; θ has %d of %d arrays",
            config.method,
            config.freeze,
            config.data_selection,
            config.selection_fraction,
            config.objective,
            config.client_selection,
            config.aggregation,
            len(trained),
            len(state),
        )
        done = checkpoint.server_round if checkpoint else 0
        if checkpoint and not done:
            log(INFO, "resuming after the pretraining round from %s", directory / CHECKPOINT_FILE)
        if done:
            log(
                INFO,
                "resuming after round %d of %d from %s",
                done,
                config.num_server_rounds,
                directory / CHECKPOINT_FILE,
            )
        return cls(
            config,
            method,
            device,
            directory,
            population,
            label_counts,
            select,
            recorder,
            frozen,
            trained,
            list(state),
            done + 1,
            checkpoint.strategy if checkpoint else {},
            checkpoints,
            config.pretrain_round and checkpoint is None,
        )

    def cohort_arguments(self) -> dict[str, Any]:
        """What every ``CohortFedAvg`` of this run is built with: cohorts, checks, stragglers, aggregation, reports."""
        config = self.config
        return {
            "population": self.population,
            "label_counts": self.label_counts,
            "select": self.select,
            "observer": self.recorder,
            "round_config": learning_rate_schedule(config),
            "fraction_evaluate": config.fraction_evaluate,
            "min_train_nodes": config.min_train_nodes,
            "straggler_fraction": config.straggler_fraction,
            "straggler_mode": config.straggler_mode,
            "straggler_work": config.straggler_work,
            "local_epochs": config.local_epochs,
            "seed": config.seed,
            "aggregation": aggregation_settings(config),
            "expected_examples": expected_examples(config),
            "first_round": self.first_round,
        }

    def strategy_arguments(self) -> dict[str, Any]:
        """The shared server step's arguments (``PartialModelFedAvg``), for a method's strategy to extend."""
        return {"frozen": ArrayRecord(self.frozen), **self.cohort_arguments()}

    def strategy(self) -> CohortFedAvg:
        """The method's strategy, or the shared one: cohorts by partition id, checked replies, robust
        aggregation of θ, φ sent once per client."""
        factory = self.method.strategy
        return factory(self) if factory is not None else PartialModelFedAvg(**self.strategy_arguments())

    def pretraining_round(self, grid: Grid) -> None:
        """Step 2 of the pretraining phase, before the federated rounds: its output becomes φ and θ, its record
        rounds.jsonl's round 0, and it is checkpointed (a run stopped after it resumes after it). A round that got no
        update fails the run, in one line."""
        start = merge_state(self.frozen, self.trained, self.order)
        try:
            with span(PRETRAINING):
                state, record = run_pretraining_round(
                    grid, self.config, start, self.population, self.label_counts, self.device
                )
        except PretrainingRoundError as err:
            log(ERROR, "%s", err)
            self.recorder.stopped("failed", failure=str(err))
            raise RunFailedError(str(err)) from None
        except Exception as err:
            self.recorder.stopped("failed", failure=f"{type(err).__name__}: {err}")
            raise
        except BaseException:
            self.recorder.stopped("interrupted")
            raise
        self.frozen, self.trained = split_state(
            state, build_model_for(self.config).upper_state_keys(self.config.freeze)
        )
        with self.recorder.writing:
            if self.recorder.finished:  # stopped meanwhile (a signal)
                raise RunStopped("the run was stopped in its pretraining round")
            self.recorder.pretraining_round_done(record)
            self.checkpoint(ROUND, ArrayRecord(self.trained), {})
        self.pretraining_round_due = False

    def rounds(self, grid: Grid) -> ArrayRecord:
        """Step 2: the pretraining round where it is due, then the remaining rounds; returns the global θ after the
        last one (unchanged when none aggregated)."""
        if self.pretraining_round_due:
            self.pretraining_round(grid)
        arrays = ArrayRecord(self.trained)
        strategy = self.strategy()
        strategy.load_state_dict(self.strategy_state)
        remaining = self.config.num_server_rounds - self.first_round + 1
        if remaining <= 0:  # resumed after its last round
            return strategy.global_arrays(arrays)
        with span(EVALUATION):
            evaluate = CentralEvaluation(self.config, self.frozen, self.device)
        try:
            result = strategy.start(
                grid=grid,
                initial_arrays=arrays,
                num_rounds=remaining,
                timeout=self.config.round_timeout,
                train_config=ConfigRecord(),
                evaluate_fn=lambda flower_round, theta: self.end_of_round(flower_round, theta, evaluate, strategy),
            )
            self.checkpoints.wait()  # the last round's checkpoint on disk (a failed write fails the run here)
        except Exception as err:
            self.recorder.stopped("failed", failure=f"{type(err).__name__}: {err}")
            raise
        except BaseException:
            self.recorder.stopped("interrupted")
            raise
        return strategy.global_arrays(result.arrays) if len(result.arrays) else arrays  # empty: every round skipped

    def end_of_round(
        self, flower_round: int, theta: ArrayRecord, evaluate: CentralEvaluation, strategy: CohortFedAvg
    ) -> MetricRecord | None:
        """After each round (Flower's round 0: before the first): evaluate the global model (and what the method
        evaluates besides), record the round (its evaluation completes its line in rounds.jsonl), checkpoint the
        run. A resumed run's starting model was evaluated before the interruption, so that evaluation is not
        repeated. ``theta`` is what the strategy carries into the next round; the global model is the strategy's
        ``global_arrays`` of it (the same arrays, except for FedFSC)."""
        if flower_round == 0 and self.first_round > 1:
            return None
        server_round = strategy.run_round(flower_round) if flower_round else 0
        if flower_round == 0:
            start = merge_state(self.frozen, strategy.global_arrays(theta).to_torch_state_dict(), self.order)
            with self.recorder.writing:  # a stop's summary, written meanwhile, names the start too
                self.recorder.started_from(state_fingerprint(start))
        loss: float | None = None
        accuracy: float | None = None
        class_accuracy: list[float | None] | None = None
        fields: dict[str, Any] = {}
        if evaluates(server_round, self.config.evaluate_every, self.config.num_server_rounds):
            with span(EVALUATION, round=server_round):
                loss, accuracy, class_accuracy = evaluate.with_classes(strategy.global_arrays(theta))
                fields = strategy.round_evaluation(theta, evaluate) if server_round > 0 else {}
        with self.recorder.writing:
            if self.recorder.finished:  # stopped meanwhile (a signal): its summary holds the rounds checkpointed
                return None
            with span(RESULTS, round=server_round):
                self.recorder.evaluated(server_round, loss, accuracy, class_accuracy=class_accuracy, **fields)
            if server_round > 0:
                with span(CHECKPOINT, round=server_round):
                    self.checkpoint(server_round, theta, strategy.state_dict())
        return MetricRecord({"loss": loss, "accuracy": accuracy}) if accuracy is not None and loss is not None else None

    def checkpoint(self, server_round: int, theta: ArrayRecord, strategy_state: dict[str, Any]) -> None:
        """Everything the next rounds depend on, after ``server_round``, written atomically in the background: the
        arrays the strategy carries on (``theta``), the selection's and the strategy's state, the results so far."""
        model = merge_state(self.frozen, theta.to_torch_state_dict(), self.order)
        state_dict = getattr(self.select, "state_dict", None)
        selection = state_dict() if state_dict else {}
        results = self.recorder.state()
        checkpoint = Checkpoint(server_round, model, selection, results, self.config.to_dict(), strategy_state)
        self.checkpoints.save(checkpoint, lambda: self.recorder.checkpointed(results))

    def finish(self, theta: ArrayRecord) -> dict[str, Any]:
        """Step 3: results, summary, plot; a run that trained nothing raises ``RunFailedError``."""
        with span(FINISH):
            summary = self._finish(theta)
        if summary["status"] == "failed":
            raise RunFailedError(f"no round aggregated an update: {summary['failure']}")
        return summary

    def _finish(self, theta: ArrayRecord) -> dict[str, Any]:
        self.recorder.write_label_counts(self.label_counts.as_json())
        summary = self.recorder.finish(
            merge_state(self.frozen, theta.to_torch_state_dict(), self.order),
            pretraining=pretraining_report(self.config),
            nodes_refused={str(node): why for node, why in self.population.refused.items()},
            label_counts_refused={str(pid): why for pid, why in sorted(self.label_counts.refused.items())},
        )
        return summary
