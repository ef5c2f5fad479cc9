"""The label counts the server holds for each client (FedEntOpt step 1, SPEC §6).

Each client is asked once, with a ``query.label_counts`` message, when it is first seen. A reply with the
wrong length, non-finite values, or (without differential privacy) negative or fractional values is
refused with a log line and the client is left out of selection. With DP the clients add Laplace noise;
noisy counts below zero are clipped to zero here, before any entropy is computed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from logging import WARNING

import numpy as np
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from strategies.client_errors import error_summary

LABEL_COUNTS = "query.label_counts"


def check_counts(values: np.ndarray, num_classes: int, noisy: bool) -> str | None:
    """Why a reported count vector is unusable, or None. Clients round and clip their noisy counts, so with or
    without differential privacy a count is a non-negative whole number."""
    if values.shape != (num_classes,):
        return f"{values.size} values for {num_classes} labels"
    if not np.all(np.isfinite(values)):
        return "non-finite values"
    if np.any(values < 0) or np.any(values != np.round(values)):
        return "negative or fractional counts"
    return None


@dataclass
class LabelCountRegistry:
    """Partition id -> label counts (clipped at zero), and the partitions whose replies were refused."""

    num_classes: int
    noisy: bool
    reply_timeout: float = 120.0
    counts: dict[int, np.ndarray] = field(default_factory=dict)
    refused: set[int] = field(default_factory=set)

    def collect(self, grid: Grid, nodes: dict[int, int]) -> None:
        """Ask every client in ``nodes`` (partition id -> node id) not asked before."""
        todo = {pid: node for pid, node in nodes.items() if pid not in self.counts and pid not in self.refused}
        if not todo:
            return
        messages = [
            Message(content=RecordDict({"config": ConfigRecord({})}), message_type=LABEL_COUNTS, dst_node_id=node)
            for node in todo.values()
        ]
        partition_of = {node: pid for pid, node in todo.items()}
        for reply in grid.send_and_receive(messages, timeout=self.reply_timeout):
            pid = partition_of[reply.metadata.src_node_id]
            if reply.has_error():
                self._refuse(pid, f"error reply: {error_summary(reply.error.reason)}")
                continue
            values = np.asarray(reply.content["label-counts"]["counts"], dtype=np.float64)
            problem = check_counts(values, self.num_classes, self.noisy)
            if problem:
                self._refuse(pid, problem)
            else:
                self.counts[pid] = np.clip(values, 0.0, None)

    def _refuse(self, pid: int, why: str) -> None:
        log(WARNING, "partition %d sent unusable label counts (%s); it is left out of selection", pid, why)
        self.refused.add(pid)

    def usable(self, partition_ids: Iterable[int]) -> list[int]:
        """Those of ``partition_ids`` whose counts the server holds."""
        return [pid for pid in partition_ids if pid in self.counts]

    def total(self, partition_ids: Iterable[int]) -> np.ndarray:
        """Summed counts of a cohort."""
        return sum((self.counts[pid] for pid in partition_ids if pid in self.counts), np.zeros(self.num_classes))

    def as_json(self) -> dict[str, list[float]]:
        return {str(pid): self.counts[pid].tolist() for pid in sorted(self.counts)}
