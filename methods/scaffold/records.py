"""The records SCAFFOLD adds to the protocol, and what its client keeps in its node state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from flwr.app import ArrayRecord

#: Server -> client, with every training message: the server's control variate c (parameter name -> float32 array).
CONTROL = "scaffold-c"
#: Client -> server, in every training reply beside θ and the metrics: Δc_i = c_i⁺ − c_i, named and shaped as c.
DELTA_CONTROL = "scaffold-delta-c"
#: The client's own control variate c_i in its ``context.state`` (never sent).
CLIENT_CONTROL = "scaffold-c-i"


def control_record(control: Mapping[str, torch.Tensor]) -> ArrayRecord:
    """A control variate as an ArrayRecord of contiguous float32 CPU arrays, in its keys' order."""
    return ArrayRecord({key: value.detach().to("cpu", torch.float32).contiguous() for key, value in control.items()})


def read_control(
    record: ArrayRecord, template: Mapping[str, torch.Tensor], keys: Sequence[str], what: str
) -> dict[str, torch.Tensor]:
    """``record`` as tensors, once it holds exactly ``keys``, each float32 and shaped as ``template``'s; ValueError
    naming ``what`` otherwise."""
    if set(record.keys()) != set(keys):
        missing, extra = set(keys) - set(record.keys()), set(record.keys()) - set(keys)
        raise ValueError(f"{what} does not match θ's parameters (missing {sorted(missing)}, extra {sorted(extra)})")
    held = record.to_torch_state_dict()
    values = {key: held[key] for key in keys}
    for key in keys:
        if values[key].shape != template[key].shape or values[key].dtype != torch.float32:
            raise ValueError(
                f"{what}[{key}] is {values[key].dtype} {tuple(values[key].shape)}, expected float32 "
                f"{tuple(template[key].shape)}"
            )
    return values
