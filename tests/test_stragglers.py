"""select_stragglers: exact counts, redrawn per round, reproducible, never the whole cohort."""

from __future__ import annotations

import pytest

from strategies.stragglers import constant_stragglers, partial_epochs, round_stragglers, select_stragglers

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


def test_constant_stragglers_are_the_same_clients_every_round() -> None:
    population = list(range(20))
    fixed = constant_stragglers(20, 0.4, seed=0)
    assert len(fixed) == 8 and fixed == sorted(fixed)
    rounds = [round_stragglers(population, 0.4, "constant", 0, r, 20) for r in range(1, 6)]
    assert all(r == fixed for r in rounds)
    assert constant_stragglers(20, 0.8, seed=0) != constant_stragglers(20, 0.8, seed=1)
    assert len(constant_stragglers(20, 0.8, seed=0)) == 16


def test_constant_stragglers_of_a_partial_cohort_and_never_all() -> None:
    fixed = constant_stragglers(10, 0.9, seed=2)
    assert len(fixed) == 9
    assert round_stragglers(fixed, 0.9, "constant", 2, 1, 10) == fixed[1:]  # a cohort of stragglers only: one delivers
    assert round_stragglers([p for p in range(10) if p not in fixed], 0.9, "constant", 2, 1, 10) == []


def test_partial_epochs_lie_in_one_to_e_and_vary() -> None:
    drawn = [partial_epochs(5, 0, r, pid) for r in range(1, 30) for pid in range(4)]
    assert set(drawn) == {1, 2, 3, 4, 5}
    assert drawn == [partial_epochs(5, 0, r, pid) for r in range(1, 30) for pid in range(4)]
