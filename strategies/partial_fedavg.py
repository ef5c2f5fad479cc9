"""Partial-model aggregation for FedFT (FedFT-EDS paper, Algorithm 1): θ travels every round, φ once per client.

The strategy's global arrays are θ only, so Flower's FedAvg mean over the replies (weighted by the
clients' ``num-examples``, which FedFT clients set to their *selected* sample count) is exactly
Equation 5 of the paper. φ is attached to a client's message until that client has replied once
successfully; an error reply or a missed deadline makes the server send φ again next time (a restarted
device, say).
"""

from __future__ import annotations

from typing import Any

from flwr.app import ArrayRecord

from protocol.messages import FROZEN
from strategies.cohort_fedavg import CohortFedAvg, RoundReplies


class PartialModelFedAvg(CohortFedAvg):
    """CohortFedAvg over θ, delivering the frozen part φ to each client once."""

    def __init__(self, *, frozen: ArrayRecord, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.frozen = frozen
        self.holding_frozen: set[int] = set()

    def records_for(self, partition_id: int, arrays: ArrayRecord) -> dict[str, ArrayRecord]:
        records = super().records_for(partition_id, arrays)
        if len(self.frozen) and partition_id not in self.holding_frozen:
            records[FROZEN] = self.frozen
        return records

    def replies_sorted(self, outcome: RoundReplies) -> None:
        """Clients that replied hold φ now; one that failed or did not answer may not (a restarted device)."""
        self.holding_frozen.update(outcome.accepted, outcome.rejected)
        self.holding_frozen.difference_update(outcome.failed, outcome.timed_out)
