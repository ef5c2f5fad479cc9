"""Node ids -> partition ids, and waiting for the population."""

from __future__ import annotations

import time

import pytest
from flwr.app import Error, Message, MetricRecord, RecordDict

import strategies.client_population as population_module
from protocol.messages import IDENTIFY
from strategies.client_population import ClientPopulation, NoClientsError
from tests.fake_grid import FakeGrid, identify_reply

NODES = {101: 2, 205: 0, 333: 1}
HOLDS = {0: 10, 1: 20, 2: 30}


def identify(nodes: dict[int, int] = NODES):
    return identify_reply(nodes, 3, HOLDS)


def test_identifies_every_node_once() -> None:
    grid = FakeGrid(NODES, {IDENTIFY: identify()})
    population = ClientPopulation(wait_seconds=0)
    assert population.available(grid) == [0, 1, 2]
    assert population.partition_of == NODES and population.expected == 3
    population.available(grid)
    assert len(grid.sent) == 3  # nobody is asked twice
    assert population.node_of(1) == 333


def test_a_late_node_is_asked_when_it_appears() -> None:
    grid = FakeGrid([101, 205], {IDENTIFY: identify()})
    population = ClientPopulation(wait_seconds=0)
    assert population.available(grid) == [0, 2]  # deadline passed: proceeds with those connected
    grid.node_ids.append(333)
    assert population.available(grid) == [0, 1, 2]
    assert [m.metadata.dst_node_id for m in grid.sent] == [101, 205, 333]


def test_disconnected_nodes_are_not_available() -> None:
    grid = FakeGrid(NODES, {IDENTIFY: identify()})
    population = ClientPopulation(wait_seconds=0)
    population.available(grid)
    grid.node_ids.remove(205)
    assert population.available(grid) == [1, 2]


def claims(answers: dict[int, dict]) -> dict:
    """A responder answering each node with the given identity numbers (or an error for None)."""

    def respond(msg: Message) -> Message:
        numbers = answers[msg.metadata.dst_node_id]
        if numbers is None:
            return Message(Error(code=1, reason="boom"), reply_to=msg)
        return Message(RecordDict({"identity": MetricRecord(numbers)}), reply_to=msg)

    return {IDENTIFY: respond}


def identity(pid: int, partitions: int = 3, examples: int = 5) -> dict:
    return {"partition-id": pid, "num-partitions": partitions, "num-examples": examples}


def test_identities_are_read_and_the_population_is_what_most_nodes_say() -> None:
    answers = {
        1: identity(0),
        2: identity(1),
        3: identity(2, partitions=1_000_000),
        4: identity(1),
        5: {"partition-id": 2, "num-partitions": 3},
        6: identity(5),
        7: None,
        8: {**identity(2), "x": 1},
    }
    population = ClientPopulation(wait_seconds=0)
    assert population.available(FakeGrid(answers, claims(answers))) == [0, 1]
    assert population.expected == 3 and population.identity_of(1).num_examples == 5
    assert population.refused == {
        3: "claims 1000000 partitions; the population has 3",
        4: "claims partition 1, which node 2 already holds",
        5: "identity lacks num-examples",
        6: "partition-id 5 is not below num-partitions 3",
        7: "error reply: boom",
        8: "identity has unexpected x",
    }


def test_a_restarted_device_takes_its_partition_back_under_a_new_node_id() -> None:
    answers = {1: identity(0), 2: identity(1)}
    grid = FakeGrid(answers, claims(answers))
    population = ClientPopulation(wait_seconds=0)
    population.available(grid)
    grid.node_ids.remove(1)
    answers[9] = identity(0)
    grid.node_ids.append(9)
    assert population.available(grid) == [0, 1] and population.node_of(0) == 9


def test_label_counts_offered_with_identities_are_kept_and_queries_go_in_batches(monkeypatch) -> None:
    from flwr.app import ConfigRecord

    import strategies.query_batches as batches
    from protocol.messages import CONFIG, LABEL_COUNTS_RECORD, WITH_LABEL_COUNTS

    def respond(msg: Message) -> Message:
        pid = NODES[msg.metadata.dst_node_id]
        content = RecordDict({"identity": MetricRecord(identity(pid, examples=HOLDS[pid]))})
        if msg.content[CONFIG][WITH_LABEL_COUNTS]:
            content[LABEL_COUNTS_RECORD] = ConfigRecord({"counts": [float(HOLDS[pid]), 0.0]})
        return Message(content, reply_to=msg)

    calls: list[int] = []
    grid = FakeGrid(NODES, {IDENTIFY: respond})
    send = grid.send_and_receive

    def counting_send(messages, *, timeout=None):
        calls.append(len(list(messages)))
        return send(messages, timeout=timeout)

    grid.send_and_receive = counting_send  # type: ignore[method-assign]
    monkeypatch.setattr(batches, "QUERY_BATCH", 2)
    population = ClientPopulation(wait_seconds=0)
    assert population.available(grid) == [0, 1, 2] and calls == [2, 1]
    assert {pid: record[LABEL_COUNTS_RECORD]["counts"] for pid, record in population.offered_counts.items()} == {
        0: [10.0, 0.0],
        1: [20.0, 0.0],
        2: [30.0, 0.0],
    }


def test_a_run_whose_every_node_is_refused_ends_after_the_wait_saying_why() -> None:
    grid = FakeGrid([101, 205, 333], claims({101: None, 205: None, 333: identity(0, partitions=3)}))
    assert ClientPopulation(wait_seconds=0).available(grid) == [0]  # one accepted: the run goes on with it
    grid = FakeGrid([101, 205], claims({101: None, 205: None}))
    population = ClientPopulation(wait_seconds=0)
    with pytest.raises(NoClientsError) as refused:
        population.available(grid)
    assert str(refused.value) == (
        "no client could join: all 2 connected nodes were refused (0 s after the start; 'node-wait-seconds' = 0); "
        "2 with: error reply: boom"
    )


def test_a_run_whose_every_node_is_refused_ends_within_the_grace_not_the_whole_wait(monkeypatch) -> None:
    """Nodes holding another dataset than the run's will not agree later: the run ends seconds after its start,
    not after ``node-wait-seconds`` (once 2 min 20 s in a deployment)."""
    monkeypatch.setattr(population_module, "ALL_REFUSED_GRACE_SECONDS", 1.5)
    grid = FakeGrid([101, 205], claims({101: None, 205: None}))
    tick = time.monotonic()
    with pytest.raises(NoClientsError, match="all 2 connected nodes were refused"):
        ClientPopulation(wait_seconds=120).available(grid)
    assert 1.5 <= time.monotonic() - tick < 10


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"the population waited ({seconds} s)")


def test_a_connected_refused_node_is_not_waited_for_in_any_round(monkeypatch) -> None:
    """Node 3 of 3 fails its identity (its data folder is missing): every node is accounted for, so neither the
    first round nor a later one waits ``node-wait-seconds`` for it."""
    monkeypatch.setattr(population_module.time, "sleep", no_sleep)
    answers = {1: identity(0), 2: identity(1), 3: None}
    grid = FakeGrid(answers, claims(answers))
    population = ClientPopulation(wait_seconds=120)
    assert population.available(grid) == [0, 1]
    assert population.available(grid) == [0, 1]
    assert population.refused == {3: "error reply: boom"}


def test_a_node_that_is_not_connected_is_still_waited_for(monkeypatch) -> None:
    answers = {1: identity(0), 2: identity(1)}
    grid = FakeGrid(answers, claims(answers))
    monkeypatch.setattr(population_module.time, "sleep", no_sleep)
    with pytest.raises(AssertionError, match="the population waited"):
        ClientPopulation(wait_seconds=120).available(grid)
