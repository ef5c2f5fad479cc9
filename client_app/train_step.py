"""The shared client step of a training round: data, global model, the local update, the reply (θ and the
round's numbers). Methods whose client does something else give ``Method.client_train`` instead."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

from client_app.feature_cache import PROCESS_CACHE
from client_app.local_data import LocalData
from client_app.local_update import UpdateResult, local_update
from client_app.node import Node
from client_app.objective import ObjectiveFactory
from models import SplitModel
from profiling.spans import CLIENT_COMPUTE, CLIENT_DATA, CLIENT_DECODE, span
from protocol.messages import (
    ARRAYS,
    CACHE_SECONDS,
    LOCAL_ENTROPY_MEAN,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PARTITION_ID,
    SELECTED_ENTROPY_MEAN,
    SELECTION_SECONDS,
    THREADS,
    TRAIN_LOSS,
    TRAIN_SECONDS,
)
from run_config import RunConfig, federated_split
from strategies.partial_model import split_state


def train_metrics(partition_id: int, result: UpdateResult) -> MetricRecord:
    """The numbers a training reply reports (``protocol.messages.TRAIN_METRICS``; the entropy means only where the
    client ran the entropy pass)."""
    metrics: dict[str, int | float | list[int] | list[float]] = {
        PARTITION_ID: partition_id,
        NUM_EXAMPLES: result.num_examples,
        NUM_LOCAL: result.num_local,
        TRAIN_LOSS: result.train_loss,
        TRAIN_SECONDS: result.train_seconds,
        SELECTION_SECONDS: result.selection_seconds,
        CACHE_SECONDS: result.cache_seconds,
        THREADS: torch.get_num_threads(),
    }
    if result.entropy is not None:
        metrics[SELECTED_ENTROPY_MEAN] = result.entropy.selected_mean
        metrics[LOCAL_ENTROPY_MEAN] = result.entropy.local_mean
    return MetricRecord(metrics)


def shared_train(node: Node, msg: Message) -> RecordDict:
    """Select local data, train θ under the configured objective, reply with θ and the round's numbers."""
    with span(CLIENT_DATA):
        data = node.data()
    with span(CLIENT_DECODE):
        model, phi_fingerprint = node.global_model(msg)
    arrays, metrics = update_and_report(node, msg, model, phi_fingerprint, data)
    return RecordDict({ARRAYS: ArrayRecord(arrays), METRICS: metrics})


def update_and_report(
    node: Node,
    msg: Message,
    model: SplitModel,
    phi_fingerprint: str,
    data: LocalData,
    *,
    config: RunConfig | None = None,
    objective_factory: ObjectiveFactory | None = None,
) -> tuple[dict[str, torch.Tensor], MetricRecord]:
    """The shared local update of the received ``model`` (``config`` replaces the node's, e.g. with fewer epochs;
    ``objective_factory`` the node's objective): θ after training and the round's numbers. A partial-work
    straggler's message sets fewer epochs."""
    config = config or dataclasses.replace(node.config, local_epochs=node.local_epochs(msg))
    server_round, learning_rate = node.round_of(msg)
    cache_dir = Path(config.feature_cache_dir).expanduser() if config.feature_cache_dir else None
    PROCESS_CACHE.configure(config.feature_cache_mb * 2**20, cache_dir)
    with span(CLIENT_COMPUTE):
        result = local_update(
            model,
            data,
            config,
            server_round=server_round,
            partition_id=node.partition_id,
            learning_rate=learning_rate,
            device=node.device,
            cache=PROCESS_CACHE if config.feature_cache else None,
            node_state=node.state,
            cache_key=(
                federated_split(config),
                node.partition_id,
                node.num_partitions,
                node.data_path,
                config.freeze,
                phi_fingerprint,
            ),
            objective_factory=objective_factory or node.objective,
        )
    _, trained = split_state({k: v.cpu() for k, v in model.state_dict().items()}, model.upper_state_keys(config.freeze))
    return trained, train_metrics(node.partition_id, result)
