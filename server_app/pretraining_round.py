"""The pretraining round: step 2 of the pretraining phase (thesis §6.4.1, Alg. 6 line 1; Table 6.5).

"The pretrained model acquired at step 1 is broadcast by the server to all participating clients in FL. Then each
client trains the distributed model locally until convergence. The server allow sufficient time for client updated
models to be returned" (§6.4.1); the server averages them (FedAvg) into the global model FL starts from, and φ is
frozen from it (§6.4.2: "φ ... has been well trained with the initialised global model in the pretraining phase").

It is a real round of the app, run by Flower's ``Strategy.start`` over one round: every connected client is sent the
whole model (no φ/θ split yet) and the convergence rule (``pretrain-round-tolerance``, ``pretrain-round-max-epochs``;
the client's side is client_app/pretraining_round.py); every reply passes the protocol's checks (the whole model's
arrays, finite, its own partition, all its samples, at most ``max-epochs`` epochs); the sound ones are averaged by
sample count through the strategy's aggregation path with the ``mean`` rule (Flower's FedAvg mean). The run's robust
rule does not apply here: every client trains to convergence, so the clients' update norms differ by design (a client
with more data takes more steps), and clipping them to the median norm would shrink the contribution of the clients
the thesis's sample-count average weighs most. No client straggles: the thesis sets no deadline in this round.

Its output is cached beside the pretrained weights, keyed by everything that determines it (the pretrained weights'
fingerprint, the clients' split and sizes, the rule and the local training settings), so every method of a
comparison starts from the same model and the clients' cost is paid once; the cached record keeps what the round
cost the clients when it ran.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping
from logging import INFO, WARNING
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from models.fingerprint import state_fingerprint
from protocol.messages import EPOCHS, LEARNING_RATE, MAX_EPOCHS, METRICS, PRETRAINING_ROUND, PRETRAINING_ROUND_METRICS
from protocol.messages import TOLERANCE as TOLERANCE_KEY
from protocol.replies import Refused
from run_config import RunConfig, federated_split
from server_app.atomic_write import replace_file, replace_text
from server_app.pretraining import cache_dir
from server_app.torch_files import load_state_dict
from strategies.central_evaluation import CentralEvaluation
from strategies.client_population import ClientPopulation
from strategies.cohort_fedavg import CohortFedAvg
from strategies.label_counts import LabelCountRegistry
from strategies.robust_aggregation import MEAN, AggregationSettings

#: Bumped whenever the round changes what it produces (cached outputs of another version are not used).
ROUND_VERSION = 1
#: The round's number in messages, rounds.jsonl and the checkpoint: it comes before federated round 1.
ROUND = 0
#: How rounds.jsonl marks the pretraining round's record.
PHASE = "pretraining-round"


class PretrainingRoundError(RuntimeError):
    """No client's update could be aggregated in the pretraining round; the message names the first problem."""


class PretrainingRoundStrategy(CohortFedAvg):
    """One round in which every connected client trains the whole model until convergence, averaged by sample
    count."""

    reply_metrics = PRETRAINING_ROUND_METRICS

    def __init__(self, *, max_epochs: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_epochs = max_epochs

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        """The protocol's checks, and at most ``max-epochs`` epochs."""
        super().check_reply(partition_id, content)
        epochs = content.metric_records[METRICS][EPOCHS]
        if isinstance(epochs, int) and epochs > self.max_epochs:
            raise Refused(f"'{EPOCHS}' = {epochs} is above the round's {MAX_EPOCHS} = {self.max_epochs}")


class RoundReport:
    """Collects what the strategy reports of the round (its observer) and the two central evaluations."""

    def __init__(self) -> None:
        self.record: dict[str, Any] = {}
        self.aggregated = False

    def round_started(self, server_round: int, cohort: list[int], bytes_down: int, **fields: Any) -> None:
        self.record.update(clients=list(cohort), bytes_down=bytes_down)

    def replies_received(
        self, server_round: int, client_stats: list[dict[str, Any]], bytes_up: int, **fields: Any
    ) -> None:
        self.aggregated = bool(fields.get("aggregated"))
        self.record.update(
            num_examples=sum(s["num_examples"] for s in client_stats),
            client_train_seconds=sum(s["train_seconds"] for s in client_stats),
            bytes_up=bytes_up,
            epochs={str(s["partition_id"]): s["epochs"] for s in client_stats},
            client_stats=client_stats,
            failed=fields.get("failed", []),
            rejected=fields.get("rejected", []),
            timed_out=fields.get("timed_out", []),
        )

    def evaluations_received(self, server_round: int, **fields: Any) -> None:
        """The round has no federated evaluation."""


def round_key(config: RunConfig, start: Mapping[str, torch.Tensor], sizes: Mapping[int, int]) -> dict[str, Any]:
    """Everything that determines the round's output: the model it starts from, the clients' data and how they
    train."""
    return {
        "version": ROUND_VERSION,
        "start": state_fingerprint(start),
        "model": config.model,
        "dropout": config.dropout,
        "split": {k: str(v) for k, v in dataclasses.asdict(federated_split(config)).items()},
        "sizes": {str(pid): size for pid, size in sorted(sizes.items())},
        "tolerance": config.pretrain_round_tolerance,
        "max-epochs": config.pretrain_round_max_epochs,
        "learning-rate": config.learning_rate,
        "momentum": config.momentum,
        "weight-decay": config.weight_decay,
        "batch-size": config.batch_size,
        "augment": config.augment,
        "eval-batch-size": config.eval_batch_size,  # the settling passes of BatchNorm (models/batchnorm.py)
        "seed": config.seed,
        "fail-partitions": config.fail_partitions,
    }


def cache_path(config: RunConfig, key: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir(config) / f"{config.model}-pretraining-round-{digest}.pt"


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _cached(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
    if not (path.is_file() and _record_path(path).is_file()):
        return None
    try:
        return load_state_dict(path), json.loads(_record_path(path).read_text())
    except (OSError, ValueError) as err:
        log(WARNING, "ignoring the cached pretraining round %s: %s; running it again", path, err)
        return None


def round_strategy(
    config: RunConfig, population: ClientPopulation, label_counts: LabelCountRegistry, observer: RoundReport
) -> PretrainingRoundStrategy:
    """The round's strategy: every connected client, the whole model, the convergence rule in the message, all local
    samples expected, the ``mean`` rule (Flower's sample-count FedAvg mean), run round 0."""
    return PretrainingRoundStrategy(
        max_epochs=config.pretrain_round_max_epochs,
        population=population,
        label_counts=label_counts,
        select=lambda available, server_round: sorted(available),
        observer=observer,
        round_config=lambda server_round: {
            LEARNING_RATE: config.learning_rate,
            PRETRAINING_ROUND: True,
            TOLERANCE_KEY: config.pretrain_round_tolerance,
            MAX_EPOCHS: config.pretrain_round_max_epochs,
        },
        seed=config.seed,
        aggregation=AggregationSettings(rule=MEAN),
        expected_examples=lambda num_local: num_local,
        first_round=ROUND,
    )


def run_pretraining_round(
    grid: Grid,
    config: RunConfig,
    start: dict[str, torch.Tensor],
    population: ClientPopulation,
    label_counts: LabelCountRegistry,
    device: torch.device,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The pretraining round from the pretrained ``start`` (the whole model): the model FL starts from and the round's
    record for rounds.jsonl (``round`` 0, ``phase``, the start's and the output's test accuracy, the clients, their
    epochs and seconds, the bytes, who failed or was refused, ``cached``). Raises ``PretrainingRoundError`` when no
    update could be aggregated."""
    connected = population.available(grid)
    sizes = {pid: population.identity_of(pid).num_examples for pid in connected}
    key = round_key(config, start, sizes)
    path = cache_path(config, key)
    if (hit := _cached(path)) is not None:
        state, record = hit
        log(
            INFO,
            "pretraining round from cache %s (its %d clients trained %.1f s, %s epochs, when it ran)",
            path,
            len(record["clients"]),
            record["client_train_seconds"],
            "-".join(map(str, sorted({*record["epochs"].values()}))),
        )
        return state, {**record, "cached": True}
    report = RoundReport()
    evaluate = CentralEvaluation(config, {}, device)
    accuracies: dict[int, tuple[float, float]] = {}

    def central(flower_round: int, arrays: ArrayRecord) -> MetricRecord:
        loss, accuracy = evaluate(arrays)
        accuracies[flower_round] = loss, accuracy
        return MetricRecord({"loss": loss, "accuracy": accuracy})

    strategy = round_strategy(config, population, label_counts, report)
    tick = time.perf_counter()
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(start),
        num_rounds=1,
        timeout=config.round_timeout,
        train_config=ConfigRecord(),
        evaluate_fn=central,
    )
    if not report.aggregated:
        problems = [
            f"client {p['partition_id']} {kind}: {p['reason']}"
            for kind in ("failed", "rejected")
            for p in report.record.get(kind, [])
        ]
        if report.record.get("timed_out"):
            problems.append(f"no reply within round-timeout from clients {report.record['timed_out']}")
        raise PretrainingRoundError(
            "the pretraining round got no update" + (f" ({problems[0]})" if problems else " (no client took part)")
        )
    state = result.arrays.to_torch_state_dict()
    (pretrained_loss, pretrained_accuracy), (loss, accuracy) = accuracies[0], accuracies[1]
    record = {
        "round": ROUND,
        "phase": PHASE,
        "pretrained_accuracy": pretrained_accuracy,
        "pretrained_loss": pretrained_loss,
        "accuracy": accuracy,
        "loss": loss,
        **report.record,
        "wall_seconds": time.perf_counter() - tick,
        "tolerance": config.pretrain_round_tolerance,
        "max_epochs": config.pretrain_round_max_epochs,
        "cached": False,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(_record_path(path), json.dumps(record, indent=1) + "\n")
    replace_file(path, lambda handle: torch.save(state, handle))
    return state, record
