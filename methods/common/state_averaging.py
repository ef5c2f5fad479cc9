"""Averaging of model states (name → tensor), uniform or weighted.

FedFSC averages few-shot classifiers uniformly (eq. 4.2); FedAT averages the per-client global copies with
p_k = |D_k| / Σ|D_j| (eq. 5.18). Both go through ``average_states``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


def average_states(
    states: Sequence[Mapping[str, torch.Tensor]], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """Σ_k p_k · state_k key by key, with p_k = weights_k / Σ weights (uniform 1/K when ``weights`` is None).

    Sums run in float64 (float32 on Apple's MPS, which has no float64) and are cast back to each tensor's dtype;
    integer buffers (BatchNorm's ``num_batches_tracked``) are rounded. Every state must have the same keys and shapes.
    """
    if not states:
        raise ValueError("nothing to average: no states given")
    keys = list(states[0])
    for index, state in enumerate(states):
        if list(state) != keys:
            raise ValueError(f"state {index} has keys {sorted(state)}, expected {sorted(keys)}")
    if weights is None:
        weights = [1.0] * len(states)
    if len(weights) != len(states):
        raise ValueError(f"{len(weights)} weights for {len(states)} states")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights must be non-negative with a positive sum, got {list(weights)}")
    device = states[0][keys[0]].device
    accumulate = torch.float32 if device.type == "mps" else torch.float64
    p = torch.tensor(weights, dtype=accumulate, device=device) / sum(weights)
    averaged: dict[str, torch.Tensor] = {}
    for key in keys:
        stacked = torch.stack([state[key].to(device=device, dtype=accumulate) for state in states])
        mean = torch.tensordot(p, stacked, dims=1)
        dtype = states[0][key].dtype
        averaged[key] = (mean.round() if not dtype.is_floating_point else mean).to(dtype)
    return averaged
