"""Experiment cells run in this process (``python -m experiments run FILE --in-process``): the real ServerApp and
ClientApp handlers, without Ray or a SuperLink; the clients answer one after another.

For small experiments on a busy machine: a simulated cell pays a minute or more to start Ray and a SuperLink, and
its clients share the same few cores anyway. Each node keeps its own ``Context`` (its ``context.state`` lives across
the run, as on a SuperNode); a handler's exception becomes an error reply and a reply later than the timeout is
dropped, as Flower does. With ``batched``, a round's train messages are answered on one thread each and the clients
train as one batched computation (``experiments/batched_cohorts.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.common.logger import FLOWER_LOGGER
from flwr.supercore.task_identity import TaskIdentity

from client_app.epoch_training import EPOCH_TRAINER
from experiments.batched_cohorts import CohortRendezvous, refusal
from protocol.messages import TRAIN
from run_config.defaults import load_defaults
from run_config.fail_partitions import parse_fail_partitions
from simulation.local_run import Resources

FIRST_NODE_ID = 101


class LocalGrid:
    """Flower's ``Grid`` for nodes ``FIRST_NODE_ID`` + partition id, each answered by the ClientApp's handlers."""

    def __init__(self, run_config: dict[str, Any], num_partitions: int, *, batched: bool = False) -> None:
        import client_app.app as client

        self.handlers = client.HANDLERS
        self.batched = batched
        self.contexts = {
            FIRST_NODE_ID + pid: Context(
                run_id=1,
                node_id=FIRST_NODE_ID + pid,
                node_config={"partition-id": pid, "num-partitions": num_partitions},
                state=RecordDict(),
                run_config=run_config,
            )
            for pid in range(num_partitions)
        }

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        messages = list(messages)
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
        """The handler's reply (an error reply if it raised) and its seconds."""
        start = time.monotonic()
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


def _kills_the_runner(run_config: dict) -> bool:
    """Whether a client is set to kill its own process (``fail-partitions`` mode ``die``): in-process, the runner's.
    A value that does not parse is left for the ServerApp to refuse at start, as any bad setting."""
    try:
        return "die" in parse_fail_partitions(str(run_config.get("fail-partitions", ""))).values()
    except ValueError:
        return False


def run_cell_in_process(
    overrides: dict, clients: int, resources: Resources, log_file: Path, *, batched: bool = False
) -> int:
    """One cell: the ServerApp's main against ``clients`` in-process nodes, its log in ``log_file``; 0 on success.
    ``batched``: each round's clients train as one batched computation (refused for a method it cannot batch)."""
    import server_app.app as server

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1  # messages need a task to come from
    run_config = {**load_defaults(), **overrides}
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s: %(message)s"))
    logger = FLOWER_LOGGER
    console = list(logger.handlers)  # the cell's log goes to its file only, as a simulated cell's does
    for other in console:
        logger.removeHandler(other)
    logger.addHandler(handler)
    try:
        if _kills_the_runner(run_config):
            raise ValueError("fail-partitions 'die' kills the client's process, here the runner's")
        if batched and (why := refusal(run_config)):
            raise ValueError(why)
        server.main(
            LocalGrid(run_config, clients, batched=batched),  # type: ignore[arg-type]
            Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config),
        )
        return 0
    except Exception as err:
        logger.error("the cell failed: %s: %s", type(err).__name__, err)
        return 1
    finally:
        logger.removeHandler(handler)
        handler.close()
        for other in console:
            logger.addHandler(other)
