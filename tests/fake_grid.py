"""An in-process stand-in for Flower's Grid: each message is answered by a Python function."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
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


def train_reply(msg: Message, arrays: dict[str, torch.Tensor], metrics: dict[str, float | int]) -> Message:
    """A training reply carrying ``arrays`` and ``metrics``."""
    record = MetricRecord(metrics)  # type: ignore[arg-type]
    return Message(RecordDict({ARRAYS: ArrayRecord(arrays), METRICS: record}), reply_to=msg)


class FakeGrid:
    """Connected node ids, and a responder per message type; records every message sent.

    Like Flower's grid, it returns only the replies that came within ``timeout``: a responder that took
    longer has its reply dropped.
    """

    def __init__(self, node_ids: Iterable[int], responders: dict[str, Respond]) -> None:
        self.node_ids = list(node_ids)
        self.responders = responders
        self.sent: list[Message] = []

    def get_node_ids(self) -> list[int]:
        return list(self.node_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        messages = list(messages)
        self.sent += messages
        replies = []
        for msg in messages:
            start = time.monotonic()
            reply = self.responders[msg.metadata.message_type](msg)
            if timeout is None or time.monotonic() - start <= timeout:
                replies.append(reply)
        return replies
