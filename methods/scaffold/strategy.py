"""SCAFFOLD's server step (Alg. 1 lines 1, 5 and 16-17): the shared strategy, with the server's control variate c
sent beside x in every training message, each reply's Δc_i read and checked, and after the round

- x ← x + (1/|S|) Σ_{i∈S} Δy_i over θ's parameters: Alg. 1's uniform mean with η_g = 1, not FedAvg's
  example-weighted one; θ's BatchNorm buffers (running statistics, no control variate) are aggregated as FedAvg
  aggregates them (example-weighted). Under a robust ``aggregation`` rule the rule's aggregate of θ is kept;
- c ← c + (1/N) Σ_{i∈S} Δc_i over the replies accepted this round, N the population (|S|/N times their mean): in
  every round, also one that is skipped for too few sound updates, since those clients have updated their c_i.

c is part of the checkpoint (``state_dict``), so a resumed run goes on with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from methods.scaffold.control import control_norm, server_control_update, server_model_update
from methods.scaffold.records import CONTROL, DELTA_CONTROL, control_record
from protocol.messages import ARRAYS
from protocol.replies import Refused, array_specs, check_arrays
from strategies.cohort_fedavg import RoundReplies
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.robust_aggregation import MEAN


class ScaffoldFedAvg(PartialModelFedAvg):
    """PartialModelFedAvg with SCAFFOLD's control variate c: sent out, updated from the clients' Δc_i, checkpointed."""

    reply_records: Mapping[str, type] = {DELTA_CONTROL: ArrayRecord}

    def __init__(self, *, control: Mapping[str, torch.Tensor], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.control = {key: value.detach().to("cpu", torch.float32).clone() for key, value in control.items()}
        self._control_record = control_record(self.control)
        self._control_specs = array_specs(self._control_record)
        self._deltas: dict[int, dict[str, torch.Tensor]] = {}  # partition id -> its checked Δc_i this round

    @property
    def control_keys(self) -> Sequence[str]:
        """θ's parameters: the keys of c and of every Δc_i."""
        return list(self.control)

    def configure_round(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._deltas = {}
        return super().configure_round(server_round, arrays, config, grid)

    def train_records_for(self, partition_id: int, arrays: ArrayRecord) -> dict[str, ArrayRecord]:
        """The shared records (x, and φ until the client holds it) and c."""
        return {**super().train_records_for(partition_id, arrays), CONTROL: self._control_record}

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        """The shared checks (θ, the metrics, exactly the records declared), then Δc_i: exactly c's names, shapes
        and dtype (float32), finite values."""
        super().check_reply(partition_id, content)
        try:
            check_arrays(content.array_records[DELTA_CONTROL], self._control_specs)
        except Refused as err:
            raise Refused(f"{DELTA_CONTROL}: {err}") from None
        self._deltas[partition_id] = content.array_records[DELTA_CONTROL].to_torch_state_dict()

    def replies_sorted(self, outcome: RoundReplies) -> None:
        """c ← c + (1/N) Σ Δc_i over the accepted replies (Alg. 1 line 17)."""
        super().replies_sorted(outcome)
        deltas = [self._deltas[pid] for pid in outcome.accepted]
        if deltas:
            self.set_control(server_control_update(self.control, deltas, self.population.expected))

    def set_control(self, control: Mapping[str, torch.Tensor]) -> None:
        self.control = {key: control[key].to(torch.float32) for key in self.control}
        self._control_record = control_record(self.control)

    def aggregate_arrays(self, contents: list[RecordDict], partition_ids: list[int]) -> tuple[ArrayRecord, dict]:
        """θ's parameters: x + the uniform mean of the Δy_i (``mean``; a robust rule's aggregate otherwise); its
        buffers as FedAvg aggregates them. The report adds ‖c‖ after this round's update."""
        arrays, report = super().aggregate_arrays(contents, partition_ids)
        report = {**report, "scaffold_control_norm": control_norm(self.control)}
        if self.aggregation.rule != MEAN:
            return arrays, report
        x = self._sent.to_torch_state_dict()
        models = [content.array_records[ARRAYS].to_torch_state_dict() for content in contents]
        updated = server_model_update(x, models, self.control_keys)
        merged = {
            key: Array(np.ascontiguousarray(updated[key].numpy())) if key in updated else array
            for key, array in arrays.items()
        }
        return ArrayRecord(merged), report

    def state_dict(self) -> dict[str, Any]:
        """c, for a resumed run (tensors: checkpoints are read with ``weights_only``)."""
        return {**super().state_dict(), CONTROL: {key: value.clone() for key, value in self.control.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        held = state.get(CONTROL)
        if held is None:
            return
        if set(held) != set(self.control) or any(held[k].shape != self.control[k].shape for k in self.control):
            raise ValueError("the checkpoint's SCAFFOLD control variate does not match θ's parameters")
        self.set_control(held)
