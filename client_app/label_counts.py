"""A client's label-count vector for FedEntOpt, optionally with local differential privacy (Lutz et al., Algorithm 1).

With ε > 0 the client releases counts + Lap(0, 1/ε) per label (the Laplace mechanism: adding or removing one
sample changes the vector by 1 in L1 norm, so the release is ε-differentially private for the client's label
histogram), rounded and clipped at 0, which as post-processing keeps the guarantee. The noise comes from the
operating system's entropy, never from the run's seed, which the server knows and could use to recompute and
remove it. The guarantee covers one release: the client answers every later request of the same run with the
same release (``context.state``), so a server asking again learns nothing new. It does not cover the number of
local samples, which every training reply reveals through ``num-examples``, nor releases in other runs, which
add up (k runs: kε).
"""

from __future__ import annotations

import numpy as np


def label_count_vector(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """How many local samples carry each label."""
    return np.bincount(labels, minlength=num_classes).astype(np.float64)


def privatise(counts: np.ndarray, epsilon: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """counts + Lap(0, 1/ε) per component, rounded and clipped at 0; ε = 0 means no noise. ``rng`` is for tests
    only: by default the noise is drawn from a generator seeded by the operating system's entropy."""
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    if epsilon == 0:
        return counts
    rng = rng if rng is not None else np.random.default_rng()  # seeded from the OS, not from the run
    return np.clip(np.round(counts + rng.laplace(0.0, 1.0 / epsilon, size=counts.shape)), 0.0, None)
