"""select_stragglers: exact counts, redrawn per round, reproducible, never the whole cohort."""

from __future__ import annotations

import pytest

from strategies.stragglers import select_stragglers

COHORT = list(range(100, 120))


@pytest.mark.parametrize(("fraction", "count"), [(0.0, 0), (0.1, 2), (0.5, 10), (0.8, 16), (0.99, 19)])
def test_drops_the_rounded_share_but_keeps_one(fraction: float, count: int) -> None:
    dropped = select_stragglers(COHORT, fraction, seed=0, server_round=1)
    assert len(dropped) == count and set(dropped) <= set(COHORT) and dropped == sorted(dropped)


def test_redrawn_every_round_and_reproducible() -> None:
    rounds = [select_stragglers(COHORT, 0.5, seed=3, server_round=r) for r in range(1, 6)]
    assert len({tuple(r) for r in rounds}) == 5
    assert rounds == [select_stragglers(COHORT, 0.5, seed=3, server_round=r) for r in range(1, 6)]
    assert rounds[0] != select_stragglers(COHORT, 0.5, seed=4, server_round=1)


def test_tiny_cohorts() -> None:
    assert select_stragglers([], 0.9, 0, 1) == []
    assert select_stragglers([7], 0.9, 0, 1) == []
    assert select_stragglers([7, 8], 0.9, 0, 1) in ([7], [8])
