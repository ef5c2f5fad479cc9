"""Stragglers (FedFT-EDS paper, Table III): each round a share of the selected clients drops out.

The dropped clients are drawn afresh every round from the round's cohort, seeded by (seed, round), so a
repeated or resumed run drops the same ones. They are not sent the round's work and contribute nothing;
at least one client of a non-empty cohort always delivers.
"""

from __future__ import annotations

import numpy as np


def straggler_count(cohort_size: int, fraction: float) -> int:
    """round(fraction · cohort_size), at most cohort_size − 1: someone always delivers."""
    return min(int(round(fraction * cohort_size)), max(cohort_size - 1, 0))


def select_stragglers(cohort: list[int], fraction: float, seed: int, server_round: int) -> list[int]:
    """``straggler_count`` partition ids of ``cohort``, sorted."""
    count = straggler_count(len(cohort), fraction)
    if count == 0:
        return []
    rng = np.random.default_rng([seed, server_round, 0x57A6])
    return sorted(int(pid) for pid in rng.choice(np.asarray(cohort), size=count, replace=False))
