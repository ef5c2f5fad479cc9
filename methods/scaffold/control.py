"""SCAFFOLD's arithmetic (Karimireddy et al., ICML 2020, Algorithm 1), as pure functions of named tensors.

A control variate is one tensor per trained parameter of θ (BatchNorm buffers have none): the server's c and each
client's c_i. With learning rates η_l (local) and η_g = 1 (global), one round of a cohort S out of N clients is

- client i, from the global model x: K local steps of y ← y − η_l (g_i(y) − c_i + c); then option II,
  c_i⁺ = c_i − c + (x − y_i) / (K η_l), and it replies Δy_i = y_i − x and Δc_i = c_i⁺ − c_i;
- server: x ← x + (1/|S|) Σ_{i∈S} Δy_i and c ← c + (1/N) Σ_{i∈S} Δc_i (= (|S|/N) · the mean Δc_i), lines 16-17.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

#: name of a trained parameter -> its control variate (or its value, or an update of it)
Named = dict[str, torch.Tensor]


def control_keys(model: nn.Module, trained_keys: Sequence[str]) -> list[str]:
    """The trained state keys that are parameters (θ's weights and biases; not BatchNorm's running statistics), in
    state-dict order: the keys of every control variate."""
    parameters = {name for name, _ in model.named_parameters()}
    return [key for key in trained_keys if key in parameters]


def zero_control(template: Mapping[str, torch.Tensor], keys: Sequence[str]) -> Named:
    """c = 0 (and c_i = 0): zeros shaped as ``template``'s ``keys``, in float32 on the CPU."""
    return {key: torch.zeros(template[key].shape, dtype=torch.float32) for key in keys}


def client_control_update(
    c_i: Mapping[str, torch.Tensor],
    c: Mapping[str, torch.Tensor],
    x: Mapping[str, torch.Tensor],
    y: Mapping[str, torch.Tensor],
    steps: int,
    learning_rate: float,
) -> tuple[Named, Named]:
    """Option II (Alg. 1 line 12): c_i⁺ = c_i − c + (x − y_i) / (K η_l), and Δc_i = c_i⁺ − c_i (line 13), for the
    round that took the global model ``x`` to ``y`` in ``steps`` (K ≥ 1) local steps of ``learning_rate`` (η_l)."""
    if steps < 1 or not learning_rate > 0:
        raise ValueError(f"option II needs K >= 1 steps and η_l > 0, got K = {steps}, η_l = {learning_rate}")
    scale = 1.0 / (steps * learning_rate)
    updated = {key: c_i[key] - c[key] + (x[key] - y[key]) * scale for key in c_i}
    return updated, {key: updated[key] - c_i[key] for key in c_i}


def server_model_update(
    x: Mapping[str, torch.Tensor], models: Sequence[Mapping[str, torch.Tensor]], keys: Sequence[str]
) -> Named:
    """x ← x + (1/|S|) Σ_i (y_i − x) over ``keys`` (Alg. 1 line 16 with η_g = 1): the uniform mean of the cohort's
    updates, whatever their sample counts."""
    if not models:
        raise ValueError("no client models to average")
    return {
        key: x[key] + sum((y[key] - x[key] for y in models), torch.zeros_like(x[key])) / len(models) for key in keys
    }


def server_control_update(
    c: Mapping[str, torch.Tensor], deltas: Sequence[Mapping[str, torch.Tensor]], population: int
) -> Named:
    """c ← c + (1/N) Σ_{i∈S} Δc_i (Alg. 1 line 17: (|S|/N) times the cohort's mean Δc_i), N the population."""
    if population < len(deltas) or population < 1:
        raise ValueError(f"a cohort of {len(deltas)} out of a population of {population}")
    return {key: c[key] + sum((d[key] for d in deltas), torch.zeros_like(c[key])) / population for key in c}


def all_finite(control: Mapping[str, torch.Tensor]) -> bool:
    """No NaN or infinity in any tensor (a local update that diverged gives a c_i⁺ with them)."""
    return all(bool(torch.isfinite(value).all()) for value in control.values())


def correction(c: Mapping[str, torch.Tensor], c_i: Mapping[str, torch.Tensor]) -> Named:
    """c − c_i: what each local gradient is corrected by (g − c_i + c, Alg. 1 line 10)."""
    return {key: c[key] - c_i[key] for key in c}


def control_norm(control: Mapping[str, torch.Tensor]) -> float:
    """‖c‖₂ over all of its tensors (reported each round as ``scaffold_control_norm``)."""
    return float(
        torch.sqrt(
            sum((value.double().pow(2).sum() for value in control.values()), torch.zeros((), dtype=torch.float64))
        )
    )
