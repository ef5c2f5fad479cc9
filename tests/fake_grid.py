"""Clients stood in for by Python functions: the in-process engine (``simulation/in_process.py``) with each message
answered by a responder of its type instead of the ClientApp, and canned responders and replies."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from protocol.messages import (
    ARRAYS,
    COUNTS,
    IDENTIFY,
    IDENTITY,
    LABEL_COUNTS,
    LABEL_COUNTS_RECORD,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    NUM_PARTITIONS,
    PARTITION_ID,
    TRAIN_METRICS,
)
from simulation.in_process import InProcessGrid

# Flower stamps messages with the identity of the running task; tests run outside any task.
TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1

Respond = Callable[[Message], Message]


def identify_reply(partition_of: dict[int, int], num_partitions: int, holds: dict[int, int]) -> Respond:
    """A responder answering ``query.identify`` like the ClientApp does (``holds``: partition id -> samples)."""

    def respond(msg: Message) -> Message:
        pid = partition_of[msg.metadata.dst_node_id]
        identity = MetricRecord({PARTITION_ID: pid, NUM_PARTITIONS: num_partitions, NUM_EXAMPLES: holds[pid]})
        return Message(RecordDict({IDENTITY: identity}), reply_to=msg)

    return respond


def label_counts_reply(partition_of: dict[int, int], counts: dict[int, list[float]]) -> Respond:
    """A responder answering ``query.label_counts`` with ``counts[partition id]``."""

    def respond(msg: Message) -> Message:
        values = counts[partition_of[msg.metadata.dst_node_id]]
        record = ConfigRecord({COUNTS: [float(v) for v in values]})
        return Message(RecordDict({LABEL_COUNTS_RECORD: record}), reply_to=msg)

    return respond


def client_responders(partition_of: dict[int, int], counts: dict[int, list[float]] | None = None) -> dict[str, Respond]:
    """identify and label-count responders for ``partition_of`` (node id -> partition id); each client holds as
    many samples as its counts add up to."""
    counts = counts or {pid: [1.0, 1.0] for pid in partition_of.values()}
    holds = {pid: max(1, int(sum(values))) for pid, values in counts.items()}
    return {
        IDENTIFY: identify_reply(partition_of, len(partition_of), holds),
        LABEL_COUNTS: label_counts_reply(partition_of, counts),
    }


def train_metrics(
    partition_id: int, num_examples: int, num_local: int, **changes: float | int
) -> dict[str, float | int]:
    """A full, sound training-reply metric record (every declared number), with ``changes`` applied."""
    metrics: dict[str, float | int] = {field.key: (1 if field.kind is int else 0.5) for field in TRAIN_METRICS}
    metrics.update({PARTITION_ID: partition_id, NUM_EXAMPLES: num_examples, NUM_LOCAL: num_local})
    metrics.update({key.replace("_", "-"): value for key, value in changes.items()})
    return metrics


def train_reply(msg: Message, arrays: dict[str, torch.Tensor], metrics: Mapping[str, Any]) -> Message:
    """A training reply carrying ``arrays`` and ``metrics``."""
    return Message(RecordDict({ARRAYS: ArrayRecord(arrays), METRICS: MetricRecord(dict(metrics))}), reply_to=msg)


class BareContexts(dict[int, Context]):
    """A node's ``Context`` for any node id, made when first asked for: responders hold no state."""

    def __missing__(self, node_id: int) -> Context:
        context = Context(run_id=1, node_id=node_id, node_config={}, state=RecordDict(), run_config={})
        self[node_id] = context
        return context


def _responding(respond: Respond) -> Callable[[Message, Context], Message]:
    return lambda msg, context: respond(msg)


class FakeGrid(InProcessGrid):
    """The in-process engine with connected ``node_ids`` (a list a test may change) and a responder per message
    type; records every message sent. As with Flower's grid, only the replies that came within ``timeout`` are
    returned, and a responder's exception becomes an error reply."""

    def __init__(self, node_ids: Iterable[int], responders: Mapping[str, Respond]) -> None:
        handlers = {kind: _responding(respond) for kind, respond in responders.items()}
        super().__init__(BareContexts(), handlers, record_sent=True)
        self.node_ids = list(node_ids)
