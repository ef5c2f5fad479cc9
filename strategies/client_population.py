"""Who is connected: maps Flower's node ids (random per run) to stable partition ids.

Before selecting a cohort the server asks every node it has not seen yet for its identity with a
``query.identify`` message, and waits (up to a deadline) until as many nodes as the clients report
(``num-partitions``) are known. Selection then works on partition ids, which are stable across runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from logging import INFO, WARNING

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

IDENTIFY = "query.identify"


@dataclass
class ClientPopulation:
    """Known clients: node id -> partition id, and the population size the clients report."""

    wait_seconds: float
    reply_timeout: float = 120.0
    partition_of: dict[int, int] = field(default_factory=dict)
    expected: int = 0

    def node_of(self, partition_id: int) -> int:
        return next(node for node, pid in self.partition_of.items() if pid == partition_id)

    def identify_new(self, grid: Grid) -> None:
        """Ask nodes not seen before who they are."""
        new = [node for node in grid.get_node_ids() if node not in self.partition_of]
        if not new:
            return
        messages = [
            Message(content=RecordDict({"config": ConfigRecord({})}), message_type=IDENTIFY, dst_node_id=node)
            for node in new
        ]
        for reply in grid.send_and_receive(messages, timeout=self.reply_timeout):
            if reply.has_error():
                log(WARNING, "node %s did not identify itself: %s", reply.metadata.src_node_id, reply.error.reason)
                continue
            identity = reply.content["identity"]
            self.partition_of[reply.metadata.src_node_id] = int(identity["partition-id"])
            self.expected = max(self.expected, int(identity["num-partitions"]))

    def available(self, grid: Grid, minimum: int = 1) -> list[int]:
        """Partition ids of the connected clients, sorted; waits for the whole population first.

        Waits until every client the population reports is known, or ``wait_seconds`` have passed and at
        least ``minimum`` are known.
        """
        deadline = time.monotonic() + self.wait_seconds
        while True:
            self.identify_new(grid)
            connected = set(grid.get_node_ids())
            known = sorted(pid for node, pid in self.partition_of.items() if node in connected)
            complete = self.expected > 0 and len(known) >= self.expected
            if complete or (time.monotonic() >= deadline and len(known) >= minimum):
                if not complete:
                    log(WARNING, "proceeding with %d of %d clients connected", len(known), self.expected)
                return known
            log(INFO, "waiting for clients: %d of %s connected", len(known), self.expected or "?")
            time.sleep(1.0)

