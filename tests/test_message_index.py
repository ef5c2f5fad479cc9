"""Flower's in-memory message store indexed by destination hands out what Flower's own scan hands out."""

from __future__ import annotations

import dataclasses

import pytest
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.proto.task_pb2 import Task
from flwr.server.superlink.fleet.vce.vce_api import _register_nodes
from flwr.server.superlink.linkstate import LinkStateFactory
from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord
from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME
from flwr.supercore.object_store import ObjectStoreFactory
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity
from flwr.superlink.federation import NoOpFederationManager
from flwr.superlink.federation.noop_federation_manager import NOOP_FEDERATION_ID
from flwr.superlink.grid import InMemoryGrid

from simulation.message_index import MessagesByDestination, index_by_destination


@pytest.fixture(autouse=True)
def server_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages are stamped with the running task's identity: here the SuperLink's, in run 1."""
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", SUPERLINK_NODE_ID)


def simulation_grid(num_nodes: int) -> tuple[InMemoryGrid, list[int]]:
    """A grid on an in-memory link state with ``num_nodes`` registered nodes, as Flower's simulation sets them up."""
    factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(), ObjectStoreFactory())
    nodes = list(_register_nodes(num_nodes, factory))
    run = dataclasses.replace(Run.create_empty(1), federation_id=NOOP_FEDERATION_ID, primary_task_id=1)
    state = factory.state()
    state.run_ids[run.run_id] = RunRecord(run=run)  # type: ignore[attr-defined]
    state.task_store[1] = Task(task_id=1, run_id=run.run_id)  # type: ignore[attr-defined]
    grid = InMemoryGrid(state_factory=factory)
    grid.set_run(run)
    return grid, nodes


def push(grid: InMemoryGrid, nodes: list[int]) -> list[str]:
    messages = [
        Message(RecordDict({"c": ConfigRecord({"n": i})}), dst_node_id=n, message_type="query.x")
        for i, n in enumerate(nodes)
    ]
    return list(grid.push_messages(messages))


def handed_out(grid: InMemoryGrid, nodes: list[int]) -> list[tuple[int, int]]:
    """(node, payload) of every message handed to ``nodes``, one call per node as the engine makes them."""
    out = []
    for node in nodes:
        for message in grid.state.get_message_ins(node_id=node, limit=1):
            out.append((node, message.content["c"]["n"]))
    return out


def test_an_indexed_store_hands_out_the_messages_flowers_scan_hands_out() -> None:
    plain, plain_nodes = simulation_grid(6)
    indexed, indexed_nodes = simulation_grid(6)
    assert index_by_destination(indexed.state) and index_by_destination(indexed.state)  # idempotent
    for grid, nodes in ((plain, plain_nodes), (indexed, indexed_nodes)):
        push(grid, [nodes[0], nodes[2], nodes[2], nodes[5]])
    sweeps = []
    for grid, nodes in ((plain, plain_nodes), (indexed, indexed_nodes)):
        first, second, third = handed_out(grid, nodes), handed_out(grid, nodes), handed_out(grid, nodes)
        sweeps.append([[(nodes.index(n), v) for n, v in sweep] for sweep in (first, second, third)])
    assert sweeps[0] == sweeps[1] == [[(0, 0), (2, 1), (5, 3)], [(2, 2)], []]


def test_replies_delete_messages_from_the_index_too() -> None:
    grid, nodes = simulation_grid(3)
    index_by_destination(grid.state)
    ids = push(grid, nodes)
    store = grid.state.message_ins_store
    assert isinstance(store, MessagesByDestination) and sorted(store.destinations) == sorted(nodes)
    assert len(handed_out(grid, nodes)) == 3
    grid.state.delete_messages(set(ids[:2]))
    assert list(store.destinations) == [nodes[2]] and store.ids_for(nodes[2]) == [ids[2]]


def test_anything_else_is_left_alone() -> None:
    class NotAState:
        message_ins_store: dict = {}

    assert not index_by_destination(NotAState()) and not index_by_destination(None)
