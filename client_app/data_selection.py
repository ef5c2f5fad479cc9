"""Which local samples a client trains on in a round (FedFT-EDS paper, Algorithm 1, data selection).

``entropy`` keeps the ⌈P·n⌉ samples whose hardened-softmax entropy is highest under the received model;
``random`` draws a uniform subset of the same size (RDS); ``all`` keeps everything. Indices are returned on the
entropies' device; random draws come from a CPU generator, so a seed picks the same subset on every device.
"""

from __future__ import annotations

import torch

from data.sample_share import selection_size


def hardened_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Shannon entropy (nats) of softmax(z / ρ) for each row of ``logits``.

    ρ < 1 hardens the distribution: confident samples drop to near-zero entropy and only the uncertain
    ones stand out. Computed from log-softmax in float64, so very small ρ does not overflow and near ties rank
    the same on every device (float32 on Apple MPS, which has no float64).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    dtype = torch.float32 if logits.device.type == "mps" else torch.float64
    log_p = torch.log_softmax(logits.to(dtype) / temperature, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1)


def select_by_entropy(entropies: torch.Tensor, size: int) -> torch.Tensor:
    """Indices of the ``size`` highest entropies, highest first; ties keep the lower index first."""
    return torch.argsort(entropies, descending=True, stable=True)[:size]


def select_random(num_samples: int, size: int, generator: torch.Generator) -> torch.Tensor:
    """A uniform random subset of ``size`` indices (sorted), drawn with a CPU ``generator``, on the CPU."""
    return torch.randperm(num_samples, generator=generator)[:size].sort().values


def select_samples(policy: str, entropies: torch.Tensor, fraction: float, generator: torch.Generator) -> torch.Tensor:
    """The indices to train on this round under ``policy`` (``all``, ``random`` or ``entropy``), on the
    entropies' device."""
    if policy == "entropy":
        return select_by_entropy(entropies, selection_size(len(entropies), fraction))
    return select_unscored(policy, len(entropies), fraction, generator).to(entropies.device)


def select_unscored(policy: str, num_samples: int, fraction: float, generator: torch.Generator) -> torch.Tensor:
    """The indices of a policy that needs no entropies (``all`` or ``random``), on the CPU: the same draw
    ``select_samples`` makes, without the forward pass."""
    if policy == "all":
        return torch.arange(num_samples)
    if policy == "random":
        return select_random(num_samples, selection_size(num_samples, fraction), generator)
    raise ValueError(f"data-selection policy {policy!r} needs entropies")
