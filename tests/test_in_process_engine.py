"""The in-process engine's grid (``simulation/in_process.py``) on hand-made messages: replies in the messages' order,
a handler's exception as an error reply, late replies dropped, server faults raised to the caller, batched cohorts
answering in order."""

from __future__ import annotations

import threading

import pytest
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict

import simulation.in_process as engine
import tests.fake_grid  # noqa: F401  (stamps messages with a task identity)
from protocol.messages import CONFIG, IDENTIFY, SERVER_ROUND, TRAIN
from simulation.in_process import FIRST_NODE_ID, InProcessGrid, ServerFaults, ServerKilled, node_contexts


def _message(node_id: int, kind: str = IDENTIFY, server_round: int = 1) -> Message:
    content = RecordDict({CONFIG: ConfigRecord({SERVER_ROUND: server_round})})
    return Message(content, dst_node_id=node_id, message_type=kind)


def _node_of(reply: Message) -> int:
    return int(reply.content["answer"]["node"]) if reply.has_content() else -1


class Clock:
    """The engine's clock in these tests: time passes only when a handler says so, so that timeouts do not depend on
    the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


CLOCK = Clock()


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "time", CLOCK)


def _answer(msg: Message, context: Context) -> Message:
    """Node 102 fails, node 103 takes 0.3 s; every other node answers at once with its id and its partition."""
    if context.node_id == 102:
        raise ValueError("no data")
    if context.node_id == 103:
        CLOCK.now += 0.3
    pid = int(context.node_config["partition-id"])
    return Message(RecordDict({"answer": MetricRecord({"node": context.node_id, "pid": pid})}), reply_to=msg)


def _grid(**options: object) -> InProcessGrid:
    return InProcessGrid(node_contexts({}, 4), {IDENTIFY: _answer, TRAIN: _answer}, **options)  # type: ignore[arg-type]


def test_nodes_hold_their_partitions_and_replies_come_in_the_messages_order() -> None:
    grid = _grid()
    assert grid.get_node_ids() == [FIRST_NODE_ID + pid for pid in range(4)]
    replies = grid.send_and_receive([_message(104), _message(101), _message(103)])
    assert [_node_of(reply) for reply in replies] == [104, 101, 103]
    assert [reply.content["answer"]["pid"] for reply in replies] == [3, 0, 2]
    assert grid.sent == []  # kept only when asked (record_sent)


def test_a_handler_exception_is_an_error_reply_and_a_late_reply_is_dropped() -> None:
    grid = _grid(record_sent=True)
    messages = [_message(node) for node in (101, 102, 103, 104)]
    replies = grid.send_and_receive(messages, timeout=0.2)
    assert [_node_of(reply) for reply in replies] == [101, -1, 104]  # 103 answered after 0.3 s
    assert replies[1].error.reason == "ValueError: no data"
    assert grid.sent == messages
    assert len(grid.send_and_receive(messages)) == 4  # no timeout: every reply


def test_a_server_fault_reaches_the_caller_and_a_stop_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    stops: list[int] = []
    monkeypatch.setattr(engine, "flower_stop", lambda: stops.append(1))
    grid = _grid(faults=ServerFaults(kill_at_round=3, stop_at_round=2))
    assert len(grid.send_and_receive([_message(101, TRAIN, 1)])) == 1 and stops == []
    assert len(grid.send_and_receive([_message(101, TRAIN, 2), _message(104, TRAIN, 2)])) == 2 and stops == [1]
    with pytest.raises(ServerKilled, match="round 3"):
        grid.send_and_receive([_message(101, TRAIN, 3)])
    with pytest.raises(ServerKilled, match="starting"):
        _grid(faults=ServerFaults(stop_at_start=True)).send_and_receive([_message(101)])
    assert stops == [1, 1]


def test_batched_train_messages_are_answered_side_by_side_in_the_messages_order() -> None:
    threads: set[str] = set()

    def answer(msg: Message, context: Context) -> Message:
        threads.add(threading.current_thread().name)
        return _answer(msg, context)

    grid = InProcessGrid(node_contexts({}, 4), {TRAIN: answer, IDENTIFY: answer}, batched=True)
    replies = grid.send_and_receive([_message(node, TRAIN) for node in (104, 101, 103)] + [_message(101)])
    assert [_node_of(reply) for reply in replies] == [104, 101, 103, 101]
    assert len(threads) >= 2  # the trainers each on a thread of their own
