"""Seeded random cohorts by partition id."""

from __future__ import annotations

from strategies.random_selection import cohort_size, select_random


def test_cohort_size_rounds_and_keeps_at_least_one() -> None:
    assert cohort_size(100, 0.1) == 10
    assert cohort_size(3, 0.1) == 1
    assert cohort_size(10, 1.0) == 10


def test_selection_is_reproducible_and_distinct() -> None:
    available = list(range(50))
    a = select_random(available, 10, seed=3, server_round=4)
    assert a == select_random(list(reversed(available)), 10, seed=3, server_round=4)
    assert len(set(a)) == 10 and set(a) <= set(available)
    assert a != select_random(available, 10, seed=3, server_round=5)


def test_never_more_than_available() -> None:
    assert sorted(select_random([4, 9], 5, seed=0, server_round=1)) == [4, 9]
