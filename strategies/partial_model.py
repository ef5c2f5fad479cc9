"""Split a model's state into the frozen lower part φ and the trained upper part θ, and merge them back.

FedFT sends only θ each round; φ is sent once per client. The server keeps φ and merges the aggregated
θ into the full global model before evaluating or saving it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

State = Mapping[str, torch.Tensor]


def split_state(state: State, upper_keys: Iterable[str]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(φ, θ): the entries not in ``upper_keys`` and those in it, each in state-dict order."""
    upper = set(upper_keys)
    unknown = upper - set(state)
    if unknown:
        raise KeyError(f"upper keys not in the state: {sorted(unknown)[:3]}")
    frozen = {k: v for k, v in state.items() if k not in upper}
    trained = {k: v for k, v in state.items() if k in upper}
    return frozen, trained


def merge_state(frozen: State, trained: State, order: Iterable[str]) -> dict[str, torch.Tensor]:
    """The full state in ``order`` (the model's state-dict keys) from φ and θ, which must partition it."""
    keys = list(order)
    overlap = set(frozen) & set(trained)
    missing = set(keys) - set(frozen) - set(trained)
    if overlap or missing:
        raise KeyError(
            f"φ and θ must partition the state: overlap {sorted(overlap)[:3]}, missing {sorted(missing)[:3]}"
        )
    return {k: frozen[k] if k in frozen else trained[k] for k in keys}
