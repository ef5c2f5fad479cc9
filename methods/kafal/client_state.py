"""What a KAFAL client keeps in its node state (``context.state``) between messages of a run.

- its pools: the labelled local indices in labelling order and their labels (``ActivePool.to_arrays``);
- its local model after its last local update, with the cycle and round it was trained in (what KSAS and the
  client-model strategies score with);
- for QBC, the global model it downloaded for that update, the round's learning rate, its local epochs (fewer for a
  straggler doing partial work) and whether it compensated (the committee's other members are trained from it);
- for LL4AL, its loss-prediction module and the cycle it belongs to.

Nothing here is sent to the server.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from torch import nn

from methods.kafal.pools import ActivePool, Oracle

POOL = "kafal-pool"
LOCAL_MODEL = "kafal-local-model"
START_MODEL = "kafal-start-model"
LOSS_MODULE = "kafal-loss-module"


@dataclass(frozen=True)
class ModelInfo:
    """When a kept model was made: its cycle and round, the round's learning rate and local epochs, whether it
    compensated."""

    cycle: int
    server_round: int
    learning_rate: float = 0.0
    compensate: bool = False
    epochs: int = 0


def _info_key(key: str) -> str:
    return f"{key}-info"


def load_pool(state: RecordDict, num_samples: int, oracle: Oracle) -> ActivePool | None:
    """The pool kept in ``state`` (None before the first message that needs it)."""
    if POOL not in state.array_records:
        return None
    record = state.array_records[POOL]
    return ActivePool.from_arrays(num_samples, record["labelled"].numpy(), record["labels"].numpy(), oracle)


def save_pool(state: RecordDict, pool: ActivePool) -> None:
    """Keep ``pool`` in ``state``."""
    arrays = pool.to_arrays()
    state[POOL] = ArrayRecord({name: Array(np.ascontiguousarray(values)) for name, values in arrays.items()})


def save_module(state: RecordDict, key: str, module: nn.Module, info: ModelInfo) -> None:
    """Keep a model's (or module's) weights, on the CPU, and when it was made."""
    state[key] = ArrayRecord({k: v.detach().cpu() for k, v in module.state_dict().items()})
    state[_info_key(key)] = ConfigRecord(
        {
            "cycle": info.cycle,
            "server-round": info.server_round,
            "learning-rate": info.learning_rate,
            "compensate": info.compensate,
            "local-epochs": info.epochs,
        }
    )


def load_module(state: RecordDict, key: str, module: nn.Module, cycle: int | None = None) -> ModelInfo | None:
    """Load the kept weights into ``module`` and say when they were made; None (``module`` untouched) when none are
    kept, or, with ``cycle``, when they are from another cycle."""
    if key not in state.array_records:
        return None
    record = state.config_records[_info_key(key)]
    info = ModelInfo(
        int(record["cycle"]),  # type: ignore[arg-type]
        int(record["server-round"]),  # type: ignore[arg-type]
        float(record["learning-rate"]),  # type: ignore[arg-type]
        bool(record["compensate"]),
        int(record["local-epochs"]),  # type: ignore[arg-type]
    )
    if cycle is not None and info.cycle != cycle:
        return None
    module.load_state_dict(state.array_records[key].to_torch_state_dict())  # copied onto the module's device
    return info
