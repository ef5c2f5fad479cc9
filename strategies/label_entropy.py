"""Entropy of label-count vectors (FedEntOpt's objective, Lutz et al., Algorithm 1), in bits."""

from __future__ import annotations

import numpy as np


def label_entropy_bits(counts: np.ndarray) -> np.ndarray:
    """H(c / ‖c‖₁) = −Σ p log₂ p for each row of ``counts`` (a vector gives a scalar); 0 for an all-zero row."""
    counts = np.asarray(counts, dtype=np.float64)
    totals = counts.sum(axis=-1, keepdims=True)
    p = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=-1)


def labels_covered(counts: np.ndarray) -> int:
    """Number of labels with a non-zero count."""
    return int(np.count_nonzero(np.asarray(counts) > 0))
