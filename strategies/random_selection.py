"""Uniform random cohort selection, reproducible from the seed and the round."""

from __future__ import annotations

import numpy as np


def cohort_size(num_available: int, fraction: float) -> int:
    """Clients per round: ``fraction`` of the available clients, rounded, at least one."""
    return max(1, min(num_available, int(round(fraction * num_available))))


def select_random(available: list[int], size: int, seed: int, server_round: int) -> list[int]:
    """``size`` distinct partition ids drawn uniformly from ``available``, in draw order."""
    rng = np.random.default_rng([seed, server_round])
    picks = rng.choice(len(available), size=min(size, len(available)), replace=False)
    return [sorted(available)[i] for i in picks]
