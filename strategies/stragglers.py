"""Stragglers: clients that cannot finish a round's work before its deadline.

Two ways of drawing them (``straggler-mode``):

- ``redraw`` (FedFT-EDS paper, Table III): each round a share of the round's cohort is drawn afresh, seeded by
  (seed, round), so a repeated or resumed run drops the same ones; at least one client of a non-empty cohort
  always delivers.
- ``constant`` (thesis Ch. 5, the FedAT/FedKAD baselines): one fixed set, round(fraction · K) of the K clients drawn
  once from (seed), is slow in every round; at least one client is never in it.

What stragglers do (``straggler-work``): ``none``, they are not sent the round's work and contribute nothing; or
``partial`` (FedProx+, thesis §5.6), they deliver after a random 1..E local epochs, drawn per client and round.
"""

from __future__ import annotations

import numpy as np

from run_config.choices import STRAGGLER_MODES


def straggler_count(cohort_size: int, fraction: float) -> int:
    """round(fraction · cohort_size), at most cohort_size − 1: someone always delivers."""
    return min(int(round(fraction * cohort_size)), max(cohort_size - 1, 0))


def select_stragglers(cohort: list[int], fraction: float, seed: int, server_round: int) -> list[int]:
    """``straggler_count`` partition ids of ``cohort``, drawn for this round, sorted."""
    count = straggler_count(len(cohort), fraction)
    if count == 0:
        return []
    rng = np.random.default_rng([seed, server_round, 0x57A6])
    return sorted(int(pid) for pid in rng.choice(np.asarray(cohort), size=count, replace=False))


def constant_stragglers(num_clients: int, fraction: float, seed: int) -> list[int]:
    """The run's fixed stragglers: ``straggler_count(num_clients, fraction)`` of partitions 0..K−1, sorted."""
    count = straggler_count(num_clients, fraction)
    if count == 0:
        return []
    rng = np.random.default_rng([seed, 0xC057])
    return sorted(int(pid) for pid in rng.choice(num_clients, size=count, replace=False))


def round_stragglers(
    cohort: list[int], fraction: float, mode: str, seed: int, server_round: int, num_clients: int
) -> list[int]:
    """The cohort's stragglers this round under ``mode``, sorted (for ``constant``: those of the fixed set selected,
    but never the whole cohort)."""
    if mode == "redraw":
        return select_stragglers(cohort, fraction, seed, server_round)
    if mode != "constant":
        raise ValueError(f"straggler-mode must be one of {', '.join(STRAGGLER_MODES)}, got {mode!r}")
    fixed = set(constant_stragglers(num_clients, fraction, seed))
    slow = sorted(pid for pid in cohort if pid in fixed)
    return slow if len(slow) < len(cohort) else slow[1:]


def partial_epochs(local_epochs: int, seed: int, server_round: int, partition_id: int) -> int:
    """A straggler's epochs this round under ``partial`` work: uniform in 1..E (the thesis's text; its code's
    ``randint(1, E)`` would give 1..E−1), seeded by (seed, round, partition)."""
    rng = np.random.default_rng([seed, server_round, partition_id, 0xE90C])
    return int(rng.integers(1, local_epochs + 1))
