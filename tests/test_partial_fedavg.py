"""PartialModelFedAvg: θ every round, φ once per client (again after an error), θ-only aggregation."""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, ConfigRecord, Error, Message

from protocol.messages import FROZEN as FROZEN_KEY
from strategies.client_population import ClientPopulation
from strategies.label_counts import LabelCountRegistry
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.robust_aggregation import AggregationSettings
from tests.fake_grid import FakeGrid, client_responders, train_metrics, train_reply
from tests.test_cohort_fedavg import Observer

NODES = {11: 0, 22: 1, 33: 2}


def make(frozen: dict, rule: str = "mean") -> tuple[PartialModelFedAvg, Observer, FakeGrid]:
    observer = Observer()
    strategy = PartialModelFedAvg(
        aggregation=AggregationSettings(rule),
        frozen=ArrayRecord(frozen),
        population=ClientPopulation(wait_seconds=0),
        label_counts=LabelCountRegistry(num_classes=2, noisy=False),
        select=lambda available, rnd: available,
        observer=observer,
    )
    return strategy, observer, FakeGrid(NODES, client_responders(NODES, {pid: [50, 50] for pid in NODES.values()}))


def reply(msg: Message, theta: torch.Tensor, n: int) -> Message:
    pid = NODES[msg.metadata.dst_node_id]
    return train_reply(msg, {"theta": theta}, train_metrics(pid, n, 100, train_loss=0.0, train_seconds=1.0))


def test_phi_is_sent_once_per_client_and_again_after_an_error() -> None:
    phi = {"phi": torch.arange(1000, dtype=torch.float32)}
    strategy, observer, grid = make(phi)
    theta = ArrayRecord({"theta": torch.zeros(4)})
    first = list(strategy.configure_train(1, theta, ConfigRecord(), grid))
    assert all(FROZEN_KEY in m.content for m in first)
    error = Message(Error(code=0, reason="crashed"), reply_to=first[2])
    strategy.aggregate_train(1, [reply(first[0], torch.ones(4), 3), reply(first[1], torch.ones(4), 1), error])
    second = list(strategy.configure_train(2, theta, ConfigRecord(), grid))
    assert [FROZEN_KEY in m.content for m in second] == [False, False, True]
    phi_bytes = ArrayRecord(phi).count_bytes()
    assert observer.started[0][2] == 3 * (theta.count_bytes() + phi_bytes)
    assert observer.started[1][2] == 3 * theta.count_bytes() + phi_bytes


def test_phi_is_sent_again_after_a_missed_deadline_but_not_after_a_rejected_update() -> None:
    strategy, _, grid = make({"phi": torch.ones(8)})
    theta = ArrayRecord({"theta": torch.zeros(4)})
    first = list(strategy.configure_train(1, theta, ConfigRecord(), grid))
    garbage = reply(first[1], torch.full((4,), float("inf")), 1)  # rejected, but the client holds φ
    strategy.aggregate_train(1, [reply(first[0], torch.ones(4), 3), garbage])  # partition 2 timed out
    second = list(strategy.configure_train(2, theta, ConfigRecord(), grid))
    assert [FROZEN_KEY in m.content for m in second] == [False, False, True]


def test_aggregate_is_the_mean_weighted_by_selected_counts() -> None:
    strategy, observer, grid = make({"phi": torch.ones(2)})
    msgs = list(strategy.configure_train(1, ArrayRecord({"theta": torch.zeros(2)}), ConfigRecord(), grid))
    replies = [
        reply(msgs[0], torch.tensor([1.0, 0.0]), 6),
        reply(msgs[1], torch.tensor([0.0, 1.0]), 2),
        reply(msgs[2], torch.tensor([4.0, 4.0]), 2),
    ]
    arrays, _ = strategy.aggregate_train(1, replies)
    torch.testing.assert_close(arrays.to_torch_state_dict()["theta"], torch.tensor([(6 + 8) / 10, (2 + 8) / 10]))
    assert set(arrays.keys()) == {"theta"}  # φ never enters the aggregate


def test_the_clipped_mean_measures_updates_from_the_theta_sent() -> None:
    strategy, _, grid = make({"phi": torch.ones(2)}, rule="clipped-mean")
    msgs = list(strategy.configure_train(1, ArrayRecord({"theta": torch.ones(2)}), ConfigRecord(), grid))
    replies = [
        reply(msgs[0], torch.tensor([2.0, 1.0]), 6),
        reply(msgs[1], torch.tensor([1.0, 2.0]), 2),
        reply(msgs[2], torch.tensor([5.0, 5.0]), 2),
    ]
    arrays, _ = strategy.aggregate_train(1, replies)
    # Δ (1, 0), (0, 1), (4, 4): median norm 1, so Δ_2 is clipped to (1, 1)/√2; weights (6, 2, 2) capped at 2
    expected = torch.full((2,), 1 + (1 + 2**-0.5) / 3)
    torch.testing.assert_close(arrays.to_torch_state_dict()["theta"], expected)
    assert set(arrays.keys()) == {"theta"}


def test_no_frozen_part_means_nothing_extra_is_sent() -> None:
    strategy, _, grid = make({})
    msgs = list(strategy.configure_train(1, ArrayRecord({"theta": torch.zeros(2)}), ConfigRecord(), grid))
    assert not any(FROZEN_KEY in m.content for m in msgs)
