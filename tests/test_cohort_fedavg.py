"""CohortFedAvg: cohorts by partition id, the round's config, weighted aggregation, observer reports."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, MessageType

from strategies.client_population import ClientPopulation
from strategies.cohort_fedavg import CohortFedAvg
from strategies.label_counts import LabelCountRegistry
from tests.fake_grid import FakeGrid, client_responders, train_reply

NODES = {11: 0, 22: 1, 33: 2, 44: 3}


class Observer:
    def __init__(self) -> None:
        self.started: list[tuple[int, list[int], int]] = []
        self.fields: list[dict[str, Any]] = []
        self.replies: list[tuple[int, list[dict[str, Any]], int]] = []

    def round_started(self, server_round: int, cohort: list[int], bytes_down: int, **fields: Any) -> None:
        self.started.append((server_round, cohort, bytes_down))
        self.fields.append(fields)

    def replies_received(self, server_round: int, client_stats: list[dict[str, Any]], bytes_up: int) -> None:
        self.replies.append((server_round, client_stats, bytes_up))


COUNTS = {0: [5, 0, 0], 1: [0, 5, 0], 2: [0, 0, 5], 3: [5, 5, 0]}


def make_strategy(observer: Observer) -> CohortFedAvg:
    return CohortFedAvg(
        population=ClientPopulation(wait_seconds=0),
        label_counts=LabelCountRegistry(num_classes=3, noisy=False),
        select=lambda available, rnd: [available[-1], available[0]],  # a fixed, order-revealing policy
        observer=observer,
        round_config=lambda rnd: {"learning-rate": 0.1 * 0.5**rnd},
    )


def test_configure_train_addresses_the_selected_partitions_in_order() -> None:
    observer = Observer()
    strategy = make_strategy(observer)
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    arrays = ArrayRecord({"w": torch.ones(3, 2)})
    messages = list(strategy.configure_train(2, arrays, ConfigRecord({"extra": 1}), grid))
    assert [m.metadata.dst_node_id for m in messages] == [44, 11]
    assert all(m.metadata.message_type == MessageType.TRAIN for m in messages)
    config = messages[0].content["config"]
    assert config["server-round"] == 2 and config["learning-rate"] == pytest.approx(0.025) and config["extra"] == 1
    assert observer.started == [(2, [3, 0], 2 * arrays.count_bytes())]
    # cohort {3, 0} holds counts [10, 5, 0]: entropy of (2/3, 1/3) in bits, two labels covered
    assert observer.fields[0]["cohort_label_entropy"] == pytest.approx(0.9182958340544896)
    assert observer.fields[0]["cohort_labels_covered"] == 2
    assert observer.fields[0]["learning_rate"] == pytest.approx(0.025)


def test_aggregate_train_is_the_example_weighted_mean_and_reports_stats() -> None:
    observer = Observer()
    strategy = make_strategy(observer)
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    messages = list(strategy.configure_train(1, ArrayRecord({"w": torch.zeros(2)}), ConfigRecord(), grid))
    replies = [
        train_reply(messages[0], {"w": torch.tensor([1.0, 2.0])},
                    {"partition-id": 3, "num-examples": 30, "num-local": 300, "train-loss": 1.0, "train-seconds": 2.0}),
        train_reply(messages[1], {"w": torch.tensor([5.0, 6.0])},
                    {"partition-id": 0, "num-examples": 10, "num-local": 100, "train-loss": 3.0, "train-seconds": 1.0}),
    ]
    arrays, metrics = strategy.aggregate_train(1, replies)
    np.testing.assert_allclose(arrays["w"].numpy(), [(30 * 1 + 10 * 5) / 40, (30 * 2 + 10 * 6) / 40])
    assert metrics["train-loss"] == pytest.approx((30 * 1.0 + 10 * 3.0) / 40)
    (_, stats, bytes_up), = observer.replies
    assert [s["partition_id"] for s in stats] == [0, 3]  # aggregated in partition-id order
    assert stats[1] == {"partition_id": 3, "num_examples": 30, "num_local": 300, "train_loss": 1.0, "train_seconds": 2.0}
    assert bytes_up == sum(r.content["arrays"].count_bytes() for r in replies)
