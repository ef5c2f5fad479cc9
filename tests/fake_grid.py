"""An in-process stand-in for Flower's Grid: each message is answered by a Python function."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from strategies.client_population import IDENTIFY
from strategies.label_counts import LABEL_COUNTS

# Flower stamps messages with the identity of the running task; tests run outside any task.
TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1

Respond = Callable[[Message], Message]


def identify_reply(partition_of: dict[int, int], num_partitions: int) -> Respond:
    """A responder answering ``query.identify`` like the ClientApp does."""

    def respond(msg: Message) -> Message:
        pid = partition_of[msg.metadata.dst_node_id]
        identity = MetricRecord({"partition-id": pid, "num-partitions": num_partitions})
        return Message(RecordDict({"identity": identity}), reply_to=msg)

    return respond


def label_counts_reply(partition_of: dict[int, int], counts: dict[int, list[float]]) -> Respond:
    """A responder answering ``query.label_counts`` with ``counts[partition id]``."""

    def respond(msg: Message) -> Message:
        values = counts[partition_of[msg.metadata.dst_node_id]]
        return Message(RecordDict({"label-counts": ConfigRecord({"counts": [float(v) for v in values]})}), reply_to=msg)

    return respond


def client_responders(partition_of: dict[int, int], counts: dict[int, list[float]] | None = None) -> dict[str, Respond]:
    """identify and label-count responders for ``partition_of`` (node id -> partition id)."""
    counts = counts or {pid: [1.0, 1.0] for pid in partition_of.values()}
    return {IDENTIFY: identify_reply(partition_of, len(partition_of)), LABEL_COUNTS: label_counts_reply(partition_of, counts)}


def train_reply(msg: Message, arrays: dict[str, torch.Tensor], metrics: dict[str, float | int]) -> Message:
    """A training reply carrying ``arrays`` and ``metrics``."""
    return Message(RecordDict({"arrays": ArrayRecord(arrays), "metrics": MetricRecord(metrics)}), reply_to=msg)


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
