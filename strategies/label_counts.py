"""The label counts the server holds for each client (FedEntOpt step 1, Lutz et al., Algorithm 1).

Each client is asked once, with a ``query.label_counts`` message, when it is first seen, unless it offered its counts
with its identity (``query.identify``); queries go a batch at a time. Either reply is read through
``protocol.replies.read_label_counts``: one whole number ≥ 0 per class (clients round and clip their noisy counts),
adding up, without differential privacy, to the samples the client said it holds. A refused reply is logged and
the client is left out of selection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from logging import WARNING

import numpy as np
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from protocol.messages import CONFIG, LABEL_COUNTS
from protocol.replies import Identity, read_label_counts, refusal
from strategies.client_errors import error_summary
from strategies.query_batches import send_in_batches


@dataclass
class LabelCountRegistry:
    """Partition id -> label counts, and the partitions whose replies were refused (with why)."""

    num_classes: int
    noisy: bool
    reply_timeout: float = 120.0
    counts: dict[int, np.ndarray] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)

    def collect(
        self,
        grid: Grid,
        nodes: Mapping[int, int],
        identities: Mapping[int, Identity],
        offered: dict[int, RecordDict] | None = None,
    ) -> None:
        """Ask every client in ``nodes`` (partition id -> node id) not asked before, except those whose counts are
        ``offered`` (partition id -> the counts it sent with its identity, taken from the mapping); ``identities``
        (partition id -> what the client said about itself) bound what its counts may add up to."""
        todo = {pid: node for pid, node in nodes.items() if pid not in self.counts and pid not in self.refused}
        for early in [pid for pid in todo if offered and pid in offered]:
            self._read(early, (offered or {}).pop(early), identities[early])
            del todo[early]
        if not todo:
            return
        messages = [
            Message(content=RecordDict({CONFIG: ConfigRecord({})}), message_type=LABEL_COUNTS, dst_node_id=node)
            for node in todo.values()
        ]
        partition_of = {node: pid for pid, node in todo.items()}
        for reply in send_in_batches(grid, messages, timeout=self.reply_timeout):
            asked = partition_of.get(reply.metadata.src_node_id)
            if asked is None:
                continue  # not asked: ignored
            if reply.has_error():
                self._refuse(asked, f"error reply: {error_summary(reply.error.reason or '')}")
                continue
            self._read(asked, reply.content, identities[asked])

    def _read(self, pid: int, content: RecordDict, identity: Identity) -> None:
        counts, reason = refusal(read_label_counts, content, self.num_classes, identity, self.noisy)
        if counts is None:
            self._refuse(pid, reason or "unreadable label counts")
        else:
            self.counts[pid] = counts

    def _refuse(self, pid: int, why: str) -> None:
        log(WARNING, "partition %d sent unusable label counts (%s); it is left out of selection", pid, why)
        self.refused[pid] = why

    def usable(self, partition_ids: Iterable[int]) -> list[int]:
        """Those of ``partition_ids`` whose counts the server holds."""
        return [pid for pid in partition_ids if pid in self.counts]

    def total(self, partition_ids: Iterable[int]) -> np.ndarray:
        """Summed counts of a cohort."""
        return sum((self.counts[pid] for pid in partition_ids if pid in self.counts), np.zeros(self.num_classes))

    def as_json(self) -> dict[str, list[float]]:
        return {str(pid): self.counts[pid].tolist() for pid in sorted(self.counts)}
