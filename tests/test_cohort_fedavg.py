"""CohortFedAvg: cohorts by partition id, the round's config, the aggregation rules, observer reports."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, MessageType
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

from protocol.replies import array_specs
from strategies.client_population import ClientPopulation
from strategies.cohort_fedavg import CohortFedAvg
from strategies.label_counts import LabelCountRegistry
from strategies.robust_aggregation import AggregationSettings, conform_to
from tests.fake_grid import FakeGrid, client_responders, train_metrics, train_reply

NODES = {11: 0, 22: 1, 33: 2, 44: 3}


class Observer:
    def __init__(self) -> None:
        self.started: list[tuple[int, list[int], int]] = []
        self.fields: list[dict[str, Any]] = []
        self.replies: list[tuple[int, list[dict[str, Any]], int]] = []
        self.reply_fields: list[dict[str, Any]] = []
        self.evaluations: list[tuple[int, dict[str, Any]]] = []

    def round_started(self, server_round: int, cohort: list[int], bytes_down: int, **fields: Any) -> None:
        self.started.append((server_round, cohort, bytes_down))
        self.fields.append(fields)

    def replies_received(
        self, server_round: int, client_stats: list[dict[str, Any]], bytes_up: int, **fields: Any
    ) -> None:
        self.replies.append((server_round, client_stats, bytes_up))
        self.reply_fields.append(fields)

    def evaluations_received(self, server_round: int, **fields: Any) -> None:
        self.evaluations.append((server_round, fields))


COUNTS = {0: [500, 0, 0], 1: [0, 500, 0], 2: [0, 0, 500], 3: [500, 500, 0]}
HOLDS = {pid: sum(counts) for pid, counts in COUNTS.items()}  # what each client says it holds


MEAN = AggregationSettings("mean")


def make_strategy(
    observer: Observer, min_train_nodes: int = 1, aggregation: AggregationSettings = MEAN
) -> CohortFedAvg:
    return CohortFedAvg(
        aggregation=aggregation,
        min_train_nodes=min_train_nodes,
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
        train_reply(
            messages[0], {"w": torch.tensor([1.0, 2.0])}, train_metrics(3, 30, 1000, train_loss=1.0, train_seconds=2.0)
        ),
        train_reply(
            messages[1], {"w": torch.tensor([5.0, 6.0])}, train_metrics(0, 10, 500, train_loss=3.0, train_seconds=1.0)
        ),
    ]
    arrays, metrics = strategy.aggregate_train(1, replies)
    np.testing.assert_allclose(arrays["w"].numpy(), [(30 * 1 + 10 * 5) / 40, (30 * 2 + 10 * 6) / 40])
    assert metrics["train-loss"] == pytest.approx((30 * 1.0 + 10 * 3.0) / 40)
    ((_, stats, bytes_up),) = observer.replies
    assert [s["partition_id"] for s in stats] == [0, 3]  # aggregated in partition-id order
    assert stats[1] == {
        key.replace("-", "_"): value
        for key, value in train_metrics(3, 30, 1000, train_loss=1.0, train_seconds=2.0).items()
    }
    assert bytes_up == sum(r.content["arrays"].count_bytes() for r in replies)
    assert observer.reply_fields == [{"aggregated": True, "failed": [], "rejected": [], "timed_out": []}]


def sound_metrics(pid: int, n: int) -> dict[str, float | int]:
    return train_metrics(pid, n, HOLDS[pid], train_loss=1.0, train_seconds=1.0)


def four_client_round(observer: Observer, min_train_nodes: int = 1, aggregation: AggregationSettings = MEAN):
    strategy = make_strategy(observer, min_train_nodes, aggregation)
    strategy.select = lambda available, rnd: available  # everyone
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    messages = list(strategy.configure_train(1, ArrayRecord({"w": torch.zeros(2)}), ConfigRecord(), grid))
    return strategy, messages


def test_failed_malformed_and_missing_replies_are_left_out_and_named() -> None:
    observer = Observer()
    strategy, (m0, m1, m2, _) = four_client_round(observer)
    replies = [
        train_reply(m0, {"w": torch.tensor([2.0, 4.0])}, sound_metrics(0, 10)),
        Message(Error(code=0, reason="ClientAppException: boom"), reply_to=m1),
        train_reply(m2, {"w": torch.tensor([float("nan"), 1.0])}, sound_metrics(2, 1000)),
        # partition 3 never answers (round timeout)
    ]
    arrays, _ = strategy.aggregate_train(1, replies)
    np.testing.assert_array_equal(arrays["w"].numpy(), [2.0, 4.0])  # only the sound update counts
    (fields,) = observer.reply_fields
    assert fields["aggregated"] is True
    assert fields["failed"] == [{"partition_id": 1, "reason": "ClientAppException: boom"}]
    assert fields["rejected"] == [{"partition_id": 2, "reason": "array w holds NaN or infinite values"}]
    assert fields["timed_out"] == [3]
    assert [s["partition_id"] for s in observer.replies[0][1]] == [0]


def test_round_is_skipped_below_min_train_nodes() -> None:
    observer = Observer()
    strategy, (m0, m1, _, _) = four_client_round(observer, min_train_nodes=2)
    replies = [
        train_reply(m0, {"w": torch.tensor([2.0, 4.0])}, sound_metrics(0, 10)),
        train_reply(m1, {"w": torch.tensor([1.0, 1.0])}, {**sound_metrics(1, 10), "num-examples": 0}),
    ]
    assert strategy.aggregate_train(1, replies) == (None, None)  # Strategy.start keeps the global model
    (fields,) = observer.reply_fields
    assert fields["aggregated"] is False and fields["timed_out"] == [2, 3]
    assert fields["rejected"] == [{"partition_id": 1, "reason": "'num-examples' = 0 is outside [1, inf]"}]


def test_resumed_strategy_numbers_rounds_on() -> None:
    observer = Observer()
    strategy = make_strategy(observer)
    strategy.first_round = 5
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    messages = list(strategy.configure_train(1, ArrayRecord({"w": torch.zeros(2)}), ConfigRecord(), grid))
    assert messages[0].content["config"]["server-round"] == 5
    assert observer.started[0][0] == 5


def test_stragglers_get_no_work_and_are_reported() -> None:
    observer = Observer()
    strategy = make_strategy(observer)
    strategy.select = lambda available, rnd: available
    strategy.straggler_fraction = 0.5
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    messages = list(strategy.configure_train(1, ArrayRecord({"w": torch.zeros(2)}), ConfigRecord(), grid))
    dropped = observer.fields[0]["dropped"]
    assert len(dropped) == 2 and len(messages) == 2
    assert sorted(NODES[m.metadata.dst_node_id] for m in messages) == sorted(set(range(4)) - set(dropped))
    assert sorted(observer.started[0][1]) == sorted(set(range(4)) - set(dropped))
    replies = [train_reply(m, {"w": torch.ones(2)}, sound_metrics(NODES[m.metadata.dst_node_id], 5)) for m in messages]
    strategy.aggregate_train(1, replies)
    assert observer.reply_fields[0]["timed_out"] == []  # a straggler is not a missing reply


def test_integer_buffers_keep_their_dtype_so_the_next_round_accepts_them() -> None:
    observer = Observer()
    strategy = make_strategy(observer)
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    sent = ArrayRecord({"w": torch.zeros(2), "bn.num_batches_tracked": torch.tensor(10)})
    messages = list(strategy.configure_train(1, sent, ConfigRecord(), grid))
    replies = [
        train_reply(messages[0], {"w": torch.ones(2), "bn.num_batches_tracked": torch.tensor(13)}, sound_metrics(3, 1)),
        train_reply(messages[1], {"w": torch.ones(2), "bn.num_batches_tracked": torch.tensor(16)}, sound_metrics(0, 2)),
    ]
    arrays, _ = strategy.aggregate_train(1, replies)
    assert arrays["bn.num_batches_tracked"].dtype == "int64" and int(arrays["bn.num_batches_tracked"].numpy()) == 15
    assert arrays["w"].dtype == "float32"


def test_the_default_rule_is_the_clipped_mean_and_its_report_names_partitions() -> None:
    observer = Observer()
    strategy = CohortFedAvg(
        population=ClientPopulation(wait_seconds=0),
        label_counts=LabelCountRegistry(num_classes=3, noisy=False),
        select=lambda available, rnd: available,
        observer=observer,
    )
    assert strategy.aggregation == AggregationSettings("clipped-mean", 1.0, 1.0, 0.2, 1)
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    messages = list(strategy.configure_train(1, ArrayRecord({"w": torch.ones(2)}), ConfigRecord(), grid))
    updates = {0: [0.0, 1.0], 1: [1.0, 0.0], 2: [0.0, -2.0], 3: [300.0, 400.0]}  # partition 3 scaled ×100
    weights = {0: 1, 1: 1, 2: 100, 3: 1}  # partition 2 inflates its weight
    replies = [
        train_reply(
            m,
            {"w": 1 + torch.tensor(updates[NODES[m.metadata.dst_node_id]])},
            sound_metrics(NODES[m.metadata.dst_node_id], weights[NODES[m.metadata.dst_node_id]]),
        )
        for m in messages
    ]
    arrays, _ = strategy.aggregate_train(1, replies)
    # norms (1, 1, 2, 500): median 1.5 bounds them, Δ_2 -> (0, −1.5), Δ_3 -> (0.9, 1.2); weights capped at median 1
    expected = 1 + (np.array([0.0, 1.0]) + np.array([1.0, 0.0]) + np.array([0.0, -1.5]) + np.array([0.9, 1.2])) / 4
    np.testing.assert_allclose(arrays["w"].numpy(), expected, rtol=1e-6)
    (fields,) = observer.reply_fields
    assert fields == {
        "aggregated": True,
        "failed": [],
        "rejected": [],
        "timed_out": [],
        "median_update_norm": 1.5,
        "clipped": [2, 3],
        "weight_capped": [2],
    }


def test_mean_is_bitwise_flowers_weighted_mean_in_partition_order() -> None:
    """``mean`` must stay exactly the FedAvg aggregation of the papers' reproductions."""
    observer = Observer()
    strategy, messages = four_client_round(observer)
    rng = np.random.default_rng(3)
    sent = ArrayRecord({"w": torch.zeros(2)})
    replies = [
        train_reply(
            m,
            {"w": torch.from_numpy(rng.standard_normal(2).astype(np.float32))},
            sound_metrics(NODES[m.metadata.dst_node_id], int(rng.integers(1, 500))),
        )
        for m in messages
    ]
    arrays, _ = strategy.aggregate_train(1, list(reversed(replies)))
    by_partition = sorted(replies, key=lambda r: r.content["metrics"]["partition-id"])
    sent = ArrayRecord({"w": torch.zeros(2)})
    expected = conform_to(aggregate_arrayrecords([r.content for r in by_partition], "num-examples"), array_specs(sent))
    assert arrays["w"].numpy().tobytes() == expected["w"].numpy().tobytes()
    assert observer.reply_fields[0] == {"aggregated": True, "failed": [], "rejected": [], "timed_out": []}


@pytest.mark.parametrize("rule", ["mean", "clipped-mean"])
def test_a_methods_extra_reply_records_are_not_averaged_into_theta(rule: str) -> None:
    """A strategy declaring more reply records (FedSplit's metadata) still aggregates θ alone."""
    observer = Observer()
    strategy, messages = four_client_round(observer, aggregation=AggregationSettings(rule))
    strategy.reply_records = {"extra": ArrayRecord}
    replies = []
    for m in messages:
        pid = NODES[m.metadata.dst_node_id]
        reply = train_reply(m, {"w": torch.full((2,), float(pid))}, sound_metrics(pid, 100))
        reply.content["extra"] = ArrayRecord({"maps": torch.ones(pid + 1, 3)})  # a different shape per client
        replies.append(reply)
    arrays, _ = strategy.aggregate_train(1, replies)
    assert list(arrays.keys()) == ["w"] and arrays["w"].numpy().shape == (2,)


def test_a_round_with_fewer_updates_than_krum_needs_is_skipped() -> None:
    observer = Observer()
    strategy, messages = four_client_round(observer, aggregation=AggregationSettings("krum", byzantine_clients=1))
    replies = [train_reply(m, {"w": torch.ones(2)}, sound_metrics(NODES[m.metadata.dst_node_id], 5)) for m in messages]
    assert strategy.aggregate_train(1, replies) == (None, None)  # 4 updates; Krum with f = 1 needs 2f + 3 = 5
    assert observer.reply_fields[0]["aggregated"] is False


def test_federated_evaluation_averages_sound_replies_and_names_the_others() -> None:
    from flwr.app import MetricRecord, RecordDict

    observer = Observer()
    strategy = make_strategy(observer)
    strategy.fraction_evaluate = 1.0
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    messages = list(strategy.configure_evaluate(3, ArrayRecord({"w": torch.zeros(2)}), ConfigRecord(), grid))
    assert sorted(NODES[m.metadata.dst_node_id] for m in messages) == [0, 1, 2, 3]
    by_partition = {NODES[m.metadata.dst_node_id]: m for m in messages}

    def evaluation(pid: int, loss: float, accuracy: float, n: int) -> Message:
        numbers = {"eval-loss": loss, "eval-acc": accuracy, "num-examples": n}
        return Message(RecordDict({"metrics": MetricRecord(numbers)}), reply_to=by_partition[pid])

    replies = [
        evaluation(0, 1.0, 0.5, 100),
        evaluation(3, 2.0, 0.8, 300),
        evaluation(1, 0.1, 1.5, 10),
        Message(Error(code=0, reason="ClientAppException: boom"), reply_to=by_partition[2]),
    ]
    metrics = strategy.aggregate_evaluate(3, replies)
    assert metrics["eval-loss"] == pytest.approx((100 * 1.0 + 300 * 2.0) / 400)
    assert metrics["eval-acc"] == pytest.approx((100 * 0.5 + 300 * 0.8) / 400)
    ((rnd, fields),) = observer.evaluations
    assert rnd == 3 and fields["evaluated"] == 2 and fields["federated_accuracy"] == pytest.approx(0.725)
    assert fields["evaluation_problems"] == [
        {"partition_id": 1, "reason": "rejected: 'eval-acc' = 1.5 is outside [0.0, 1.0]"},
        {"partition_id": 2, "reason": "failed: ClientAppException: boom"},
    ]


def test_partial_work_stragglers_deliver_after_fewer_epochs() -> None:
    observer = Observer()
    strategy = make_strategy(observer)
    strategy.select = lambda available, rnd: available
    strategy.straggler_fraction, strategy.straggler_mode, strategy.straggler_work = 0.5, "constant", "partial"
    strategy.local_epochs = 5
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    strategy.population.available(grid)
    messages = list(strategy.configure_train(1, ArrayRecord({"w": torch.zeros(2)}), ConfigRecord(), grid))
    assert len(messages) == 4 and observer.fields[0]["dropped"] == []
    shortened = {NODES[m.metadata.dst_node_id]: m.content["config"].get("local-epochs") for m in messages}
    partial = observer.fields[0]["partial_epochs"]
    assert len(partial) == 2 and all(1 <= e <= 5 for e in partial.values())
    assert {str(pid): e for pid, e in shortened.items() if e is not None} == partial
