"""The in-process engine: the real ServerApp against the ClientApp's own handlers in this process, without Ray or a
SuperLink; the clients answer one after another.

One engine for the experiment runner (``python -m experiments run FILE --in-process``: a simulated cell pays a
minute or more to start Ray and a SuperLink, and its clients share the same few cores anyway), the benchmarks and the
tests. Each node keeps its own ``Context`` (its ``context.state`` lives across the run, as on a SuperNode); a
handler's exception becomes an error reply and a reply later than the timeout is dropped, as Flower does. Options:
``batched``, a round's train messages are answered on one thread each and the clients train as one batched
computation (``simulation/batched_cohorts.py``); ``faults``, the server process killed or stopped at a given moment
(``ServerFaults``), to check that a run resumes and stops as it should.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from flwr.app import Context, Error, Message, RecordDict
from flwr.common.logger import FLOWER_LOGGER
from flwr.serverapp import Grid
from flwr.supercore.exit.exit_handler import trigger_exit_handlers
from flwr.supercore.task_identity import TaskIdentity

import client_app.app as client
import server_app.app as server
from client_app.epoch_training import EPOCH_TRAINER
from protocol.messages import CONFIG, IDENTIFY, SERVER_ROUND, TRAIN
from run_config.defaults import load_defaults
from run_config.fail_partitions import parse_fail_partitions
from simulation.batched_cohorts import CohortRendezvous, refusal
from simulation.local_run import Resources

#: Node ids are this plus the partition id, as a SuperNode's would be any number Flower gives it.
FIRST_NODE_ID = 101
#: What answers one message type on a node: the ClientApp's handler, or a test's stand-in.
Handler = Callable[[Message, Context], Message]


class ServerKilled(RuntimeError):
    """Stands for the server process dying (raised by the engine when its ``ServerFaults`` say so)."""


def flower_stop() -> None:
    """Run Flower's exit handlers as its SIGINT handler does (those run before its force-exit, then the rest),
    without ending the process."""
    trigger_exit_handlers(run_before_force_exit=True)
    trigger_exit_handlers(run_before_force_exit=False)


@dataclass
class ServerFaults:
    """Where the engine stands in for the server's process failing: ``kill_at_round`` dies (``ServerKilled``) when
    that round's training starts; ``stop_at_round`` runs Flower's exit handlers there, as its SIGINT handler does,
    and answers on (once); ``stop_at_start`` runs them at the clients' identity query (the run is starting:
    pretraining) and then dies, as the engine's process ends after them."""

    kill_at_round: int | None = None
    stop_at_round: int | None = None
    stop_at_start: bool = False

    def before_answer(self, msg: Message) -> None:
        """Act as told before ``msg`` is answered."""
        kind = msg.metadata.message_type
        if kind == IDENTIFY and self.stop_at_start:
            flower_stop()
            raise ServerKilled("stopped while the run was starting")
        if kind == TRAIN and msg.content[CONFIG][SERVER_ROUND] == self.kill_at_round:
            raise ServerKilled(f"killed at the start of round {self.kill_at_round}")
        if kind == TRAIN and msg.content[CONFIG][SERVER_ROUND] == self.stop_at_round:
            self.stop_at_round = None
            flower_stop()


def node_contexts(run_config: dict[str, Any], num_partitions: int) -> dict[int, Context]:
    """One ``Context`` per node, node ``FIRST_NODE_ID`` + partition id holding that partition, as a SuperNode gives
    its ClientApp (every node reads the one ``run_config``, as every node of a run is given the same)."""
    return {
        FIRST_NODE_ID + pid: Context(
            run_id=1,
            node_id=FIRST_NODE_ID + pid,
            node_config={"partition-id": pid, "num-partitions": num_partitions},
            state=RecordDict(),
            run_config=run_config,
        )
        for pid in range(num_partitions)
    }


class InProcessGrid:
    """Flower's ``Grid`` for nodes answered in this process: a message by ``handlers[its type]`` (the ClientApp's
    ``HANDLERS`` unless told otherwise, read at each message) with its node's ``Context``.

    ``node_ids`` are the connected nodes (those of ``contexts`` at first). ``record_sent`` keeps every message sent
    in ``sent`` (a test's record; a long run would hold every model it sent).
    """

    def __init__(
        self,
        contexts: Mapping[int, Context],
        handlers: Mapping[str, Handler] | None = None,
        *,
        batched: bool = False,
        faults: ServerFaults | None = None,
        record_sent: bool = False,
    ) -> None:
        self.contexts = contexts
        self.handlers: Mapping[str, Handler] = client.HANDLERS if handlers is None else handlers
        self.node_ids = list(contexts)
        self.batched = batched
        self.faults = faults
        self.record_sent = record_sent
        self.sent: list[Message] = []
        self._faults_lock = threading.Lock()

    def get_node_ids(self) -> list[int]:
        return list(self.node_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        """The replies, in the order of ``messages``, of those answered within ``timeout`` seconds."""
        messages = list(messages)
        if self.record_sent:
            self.sent += messages
        trains = [msg for msg in messages if msg.metadata.message_type == TRAIN]
        if not self.batched or len(trains) < 2:
            answered = [self._answer(msg) for msg in messages]
        else:
            rendezvous = CohortRendezvous(len(trains))
            with ThreadPoolExecutor(max_workers=len(trains)) as pool:
                futures = {id(msg): pool.submit(self._answer_in_cohort, msg, rendezvous) for msg in trains}
                answered = [futures[id(msg)].result() if id(msg) in futures else self._answer(msg) for msg in messages]
        return [reply for reply, seconds in answered if timeout is None or seconds <= timeout]

    def _answer(self, msg: Message) -> tuple[Message, float]:
        """The handler's reply (an error reply if it raised) and its seconds; a server fault raises."""
        start = time.monotonic()
        if self.faults is not None:
            with self._faults_lock:
                self.faults.before_answer(msg)
        try:
            reply = self.handlers[msg.metadata.message_type](msg, self.contexts[msg.metadata.dst_node_id])
        except Exception as err:  # what Flower's ClientApp runner does with a handler's exception
            reply = Message(Error(code=1, reason=f"{type(err).__name__}: {err}"), reply_to=msg)
        return reply, time.monotonic() - start

    def _answer_in_cohort(self, msg: Message, rendezvous: CohortRendezvous) -> tuple[Message, float]:
        """``_answer`` on this thread, its epochs trained with the round's cohort."""
        seat = rendezvous.seat()
        token = EPOCH_TRAINER.set(seat.train)
        try:
            return self._answer(msg)
        finally:
            EPOCH_TRAINER.reset(token)
            seat.leave()


def run_server(grid: InProcessGrid, run_config: dict[str, Any]) -> None:
    """The ServerApp's main with ``run_config`` against ``grid``, to the end of the run (or a server fault)."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1  # messages need a task to come from
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config)
    server.main(cast(Grid, grid), context)


def run_in_process(
    run_config: dict[str, Any],
    num_partitions: int,
    *,
    batched: bool = False,
    faults: ServerFaults | None = None,
    record_sent: bool = False,
) -> InProcessGrid:
    """A whole run of ``run_config`` (complete: the app's defaults and the overrides) against ``num_partitions``
    in-process nodes; the grid, with its nodes' contexts (and what was sent, with ``record_sent``)."""
    grid = InProcessGrid(
        node_contexts(run_config, num_partitions), batched=batched, faults=faults, record_sent=record_sent
    )
    run_server(grid, run_config)
    return grid


def kills_the_runner(run_config: Mapping[str, Any]) -> bool:
    """Whether a client is set to kill its own process (``fail-partitions`` mode ``die``): in-process, the runner's.
    A value that does not parse is left for the ServerApp to refuse at start, as any bad setting."""
    try:
        return "die" in parse_fail_partitions(str(run_config.get("fail-partitions", ""))).values()
    except ValueError:
        return False


def run_cell_in_process(
    overrides: dict, clients: int, resources: Resources, log_file: Path, *, batched: bool = False
) -> int:
    """One experiment cell: the ServerApp's main against ``clients`` in-process nodes, its log in ``log_file``; 0 on
    success. ``batched``: each round's clients train as one batched computation (refused for a method it cannot
    batch)."""
    run_config = {**load_defaults(), **overrides}
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s: %(message)s"))
    logger = FLOWER_LOGGER
    console = list(logger.handlers)  # the cell's log goes to its file only, as a simulated cell's does
    for other in console:
        logger.removeHandler(other)
    logger.addHandler(handler)
    try:
        if kills_the_runner(run_config):
            raise ValueError("fail-partitions 'die' kills the client's process, here the runner's")
        if batched and (why := refusal(run_config)):
            raise ValueError(why)
        run_in_process(run_config, clients, batched=batched)
        return 0
    except Exception as err:
        logger.error("the cell failed: %s: %s", type(err).__name__, err)
        return 1
    finally:
        logger.removeHandler(handler)
        handler.close()
        for other in console:
            logger.addHandler(other)
