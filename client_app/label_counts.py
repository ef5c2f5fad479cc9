"""A client's label-count vector for FedEntOpt, optionally with local differential privacy (SPEC §6)."""

from __future__ import annotations

import numpy as np


def label_count_vector(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """How many local samples carry each label."""
    return np.bincount(labels, minlength=num_classes).astype(np.float64)


def privatise(counts: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """counts + Lap(0, 1/ε) per component (the Laplace mechanism for sensitivity 1); ε = 0 means no noise."""
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    if epsilon == 0:
        return counts
    return counts + rng.laplace(0.0, 1.0 / epsilon, size=counts.shape)
