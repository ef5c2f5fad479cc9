"""Who is connected: maps Flower's node ids (random per run) to stable partition ids.

Before selecting a cohort the server asks every node it has not seen yet for its identity with a
``query.identify`` message, and waits (up to a deadline) until as many nodes as the clients report
(``num-partitions``) are known. Selection then works on partition ids, which are stable across runs.

Nodes are asked a batch at a time (``strategies/query_batches.py``), and for their label counts along (the
server keeps what they offer for ``LabelCountRegistry``, so that the start costs one query per client, not two).

An identity is bad input like any reply (``protocol.replies.read_identity``). The population size is the
``num-partitions`` most of the first identified nodes report, so one node claiming a million partitions cannot
make the server wait for, or partition the data for, a million clients; a node that disagrees with it, or claims a
partition a connected node already holds, is refused (logged, and never selected). When every node that connected
was refused (and ``ALL_REFUSED_GRACE_SECONDS`` have passed, or the wait is over), the run cannot start:
``NoClientsError`` names how many were refused and why (a setting no client can work with, such as a split the data
cannot make or another dataset than the nodes hold, refuses them all alike).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from logging import INFO, WARNING

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from protocol.messages import CONFIG, IDENTIFY, LABEL_COUNTS_RECORD, WITH_LABEL_COUNTS
from protocol.replies import Identity, read_identity, refusal
from strategies.client_errors import error_summary
from strategies.query_batches import send_in_batches

#: A run whose every connected node was refused (for instance all hold another dataset than the run's) fails this
#: long after its start, not after the whole ``node-wait-seconds``: nodes that disagree with the run will not agree
#: later, and an operator should learn it in seconds.
ALL_REFUSED_GRACE_SECONDS = 10.0


class NoClientsError(ValueError):
    """Every node that connected was refused, and the wait for others is over."""


@dataclass
class ClientPopulation:
    """Known clients (node id -> identity), the refused nodes, and the population size the clients agree on."""

    wait_seconds: float
    reply_timeout: float = 120.0
    identities: dict[int, Identity] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)  # node id -> why its identity was not accepted
    expected: int = 0
    #: partition id -> the label counts its node offered with its identity (taken by ``LabelCountRegistry``)
    offered_counts: dict[int, RecordDict] = field(default_factory=dict)
    _node_by_partition: dict[int, int] = field(default_factory=dict)

    @property
    def partition_of(self) -> dict[int, int]:
        """Node id -> partition id of every accepted node."""
        return {node: identity.partition_id for node, identity in self.identities.items()}

    def node_of(self, partition_id: int) -> int:
        return self._node_by_partition[partition_id]

    def identity_of(self, partition_id: int) -> Identity:
        return self.identities[self.node_of(partition_id)]

    def identify_new(self, grid: Grid, connected: list[int] | None = None) -> None:
        """Ask nodes not seen before (of ``connected``, by default all) who they are, and admit those whose answers
        hold together."""
        connected = list(grid.get_node_ids()) if connected is None else connected
        new = [node for node in connected if node not in self.identities and node not in self.refused]
        if not new:
            return
        asked = set(new)  # replies matched against a list made the start quadratic (100,000 clients: minutes)
        ask = ConfigRecord({WITH_LABEL_COUNTS: True})
        messages = [Message(content=RecordDict({CONFIG: ask}), message_type=IDENTIFY, dst_node_id=node) for node in new]
        claims: dict[int, Identity] = {}
        offered: dict[int, RecordDict] = {}
        for reply in send_in_batches(grid, messages, timeout=self.reply_timeout):
            node = reply.metadata.src_node_id
            if node not in asked:
                continue
            if reply.has_error():
                self._refuse(node, f"error reply: {error_summary(reply.error.reason or '')}")
                continue
            identity, reason = refusal(read_identity, reply.content)
            if identity is None:
                self._refuse(node, reason or "unreadable identity")
            else:
                claims[node] = identity
                if LABEL_COUNTS_RECORD in reply.content:
                    offered[node] = RecordDict({LABEL_COUNTS_RECORD: reply.content[LABEL_COUNTS_RECORD]})
        self._admit(claims, connected)
        for node, counts in offered.items():
            if node in self.identities:
                self.offered_counts[self.identities[node].partition_id] = counts

    def _admit(self, claims: dict[int, Identity], connected: Iterable[int]) -> None:
        if not claims:
            return
        if not self.expected:
            sizes = Counter(identity.num_partitions for identity in claims.values())
            self.expected = min(sizes, key=lambda size: (-sizes[size], size))  # most common; ties: the smaller
        online = set(connected)
        held = {identity.partition_id: node for node, identity in self.identities.items() if node in online}
        for node in sorted(claims):
            identity = claims[node]
            if identity.num_partitions != self.expected:
                self._refuse(node, f"claims {identity.num_partitions} partitions; the population has {self.expected}")
            elif identity.partition_id in held:
                self._refuse(
                    node,
                    f"claims partition {identity.partition_id}, which node {held[identity.partition_id]} already holds",
                )
            else:
                old = self._node_by_partition.get(identity.partition_id)
                if old is not None:  # a restarted device under a new node id
                    del self.identities[old]
                self.identities[node] = identity
                self._node_by_partition[identity.partition_id] = node
                held[identity.partition_id] = node

    def _refuse(self, node: int, why: str) -> None:
        log(WARNING, "node %s is refused: %s", node, why)
        self.refused[node] = why

    def available(self, grid: Grid, minimum: int = 1, while_waiting: Callable[[], None] | None = None) -> list[int]:
        """Partition ids of the connected clients, sorted; waits for the whole population first.

        Waits until every node of the population the clients report is connected (admitted, or connected and
        refused: a refused node will not be admitted later under the same id, so it is not waited for), or
        ``wait_seconds`` have passed and at least ``minimum`` are known. ``while_waiting`` is called at every poll
        (what it raises ends the wait).
        """
        start = time.monotonic()
        deadline = start + self.wait_seconds
        while True:
            if while_waiting is not None:
                while_waiting()
            connected = list(grid.get_node_ids())
            self.identify_new(grid, connected)
            online = set(connected)
            known = sorted(identity.partition_id for node, identity in self.identities.items() if node in online)
            refused_online = len(online & self.refused.keys())
            complete = self.expected > 0 and len(known) + refused_online >= self.expected
            waited = time.monotonic() >= deadline
            if complete or (waited and len(known) >= minimum):
                if not complete:
                    log(WARNING, "proceeding with %d of %d clients connected", len(known), self.expected)
                return known
            every_one_refused = not known and connected and online <= self.refused.keys()
            if every_one_refused and (waited or time.monotonic() - start >= ALL_REFUSED_GRACE_SECONDS):
                raise NoClientsError(self._all_refused(connected, time.monotonic() - start))
            log(INFO, "waiting for clients: %d of %s connected", len(known), self.expected or "?")
            time.sleep(1.0)

    def _all_refused(self, connected: list[int], waited: float) -> str:
        reasons = Counter(self.refused[node] for node in connected)
        why, count = reasons.most_common(1)[0]
        others = f"; {len(connected) - count} for other reasons" if count < len(connected) else ""
        return (
            f"no client could join: all {len(connected)} connected nodes were refused ({waited:.0f} s after the "
            f"start; 'node-wait-seconds' = {self.wait_seconds:g}); {count} with: {why}{others}"
        )
