"""Experiment cells run in this process (``python -m experiments run FILE --in-process``): the real ServerApp and
ClientApp handlers, without Ray or a SuperLink; the clients answer one after another.

For small experiments on a busy machine: a simulated cell pays a minute or more to start Ray and a SuperLink, and
its clients share the same few cores anyway. Each node keeps its own ``Context`` (its ``context.state`` lives across
the run, as on a SuperNode); a handler's exception becomes an error reply and a reply later than the timeout is
dropped, as Flower does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.common.logger import FLOWER_LOGGER
from flwr.supercore.task_identity import TaskIdentity

from run_config.defaults import load_defaults
from run_config.fail_partitions import parse_fail_partitions
from simulation.local_run import Resources

FIRST_NODE_ID = 101


class LocalGrid:
    """Flower's ``Grid`` for nodes ``FIRST_NODE_ID`` + partition id, each answered by the ClientApp's handlers."""

    def __init__(self, run_config: dict[str, Any], num_partitions: int) -> None:
        import client_app.app as client

        self.handlers = client.HANDLERS
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
        replies = []
        for msg in messages:
            start = time.monotonic()
            try:
                reply = self.handlers[msg.metadata.message_type](msg, self.contexts[msg.metadata.dst_node_id])
            except Exception as err:  # what Flower's ClientApp runner does with a handler's exception
                reply = Message(Error(code=1, reason=f"{type(err).__name__}: {err}"), reply_to=msg)
            if timeout is None or time.monotonic() - start <= timeout:
                replies.append(reply)
        return replies


def _kills_the_runner(run_config: dict) -> bool:
    """Whether a client is set to kill its own process (``fail-partitions`` mode ``die``): in-process, the runner's.
    A value that does not parse is left for the ServerApp to refuse at start, as any bad setting."""
    try:
        return "die" in parse_fail_partitions(str(run_config.get("fail-partitions", ""))).values()
    except ValueError:
        return False


def run_cell_in_process(overrides: dict, clients: int, resources: Resources, log_file: Path) -> int:
    """One cell: the ServerApp's main against ``clients`` in-process nodes, its log in ``log_file``; 0 on success."""
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
        server.main(
            LocalGrid(run_config, clients),  # type: ignore[arg-type]
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
