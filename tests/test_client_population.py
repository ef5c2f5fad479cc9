"""Node ids -> partition ids, and waiting for the population."""

from __future__ import annotations

from tests.fake_grid import FakeGrid, identify_reply
from strategies.client_population import IDENTIFY, ClientPopulation

NODES = {101: 2, 205: 0, 333: 1}


def test_identifies_every_node_once() -> None:
    grid = FakeGrid(NODES, {IDENTIFY: identify_reply(NODES, 3)})
    population = ClientPopulation(wait_seconds=0)
    assert population.available(grid) == [0, 1, 2]
    assert population.partition_of == NODES and population.expected == 3
    population.available(grid)
    assert len(grid.sent) == 3  # nobody is asked twice
    assert population.node_of(1) == 333


def test_a_late_node_is_asked_when_it_appears() -> None:
    grid = FakeGrid([101, 205], {IDENTIFY: identify_reply(NODES, 3)})
    population = ClientPopulation(wait_seconds=0)
    assert population.available(grid) == [0, 2]  # deadline passed: proceeds with those connected
    grid.node_ids.append(333)
    assert population.available(grid) == [0, 1, 2]
    assert [m.metadata.dst_node_id for m in grid.sent] == [101, 205, 333]


def test_disconnected_nodes_are_not_available() -> None:
    grid = FakeGrid(NODES, {IDENTIFY: identify_reply(NODES, 3)})
    population = ClientPopulation(wait_seconds=0)
    population.available(grid)
    grid.node_ids.remove(205)
    assert population.available(grid) == [1, 2]
