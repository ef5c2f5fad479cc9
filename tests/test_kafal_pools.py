"""KAFAL pools: exact sizes, disjoint pools, labels revealed only through the oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from methods.kafal.pools import ActivePool, initial_labelled_size, query_budget


class RecordingOracle:
    """Returns labels from a hidden array and records every index it was asked for."""

    def __init__(self, labels: torch.Tensor) -> None:
        self._labels = labels
        self.asked: list[int] = []

    def __call__(self, indices: torch.Tensor) -> torch.Tensor:
        self.asked.extend(indices.tolist())
        return self._labels[indices]


def make_pool(n: int = 200, fraction: float = 0.1, seed: int = 0) -> tuple[ActivePool, RecordingOracle, torch.Tensor]:
    hidden = torch.randint(0, 5, (n,), generator=torch.Generator().manual_seed(99))
    oracle = RecordingOracle(hidden)
    pool = ActivePool.draw_initial(n, fraction, oracle, torch.Generator().manual_seed(seed))
    return pool, oracle, hidden


@pytest.mark.parametrize(
    ("n", "fraction", "size"),
    [(5000, 0.1, 500), (4837, 0.1, 484), (30, 0.1, 3), (7, 0.05, 1), (0, 0.1, 0), (100, 1.0, 100)],
)
def test_sizes_are_the_ceiling_of_the_fraction(n: int, fraction: float, size: int) -> None:
    assert initial_labelled_size(n, fraction) == size
    assert query_budget(n, fraction) == size


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_fractions_are_validated_by_key(fraction: float) -> None:
    with pytest.raises(ValueError, match=r"'kafal.al-initial-fraction' must be in \(0, 1\]"):
        initial_labelled_size(100, fraction)
    with pytest.raises(ValueError, match=r"'kafal.al-budget-fraction' must be in \(0, 1\]"):
        query_budget(100, fraction)


def test_initial_draw_is_seeded_and_labels_only_the_drawn_samples() -> None:
    pool, oracle, hidden = make_pool(200, 0.1, seed=3)
    again, _, _ = make_pool(200, 0.1, seed=3)
    other, _, _ = make_pool(200, 0.1, seed=4)
    assert len(pool.labelled) == 20 and len(pool.unlabelled) == 180
    assert pool.labelled.tolist() == again.labelled.tolist()
    assert pool.labelled.tolist() != other.labelled.tolist()
    assert sorted(oracle.asked) == sorted(pool.labelled.tolist())
    assert pool.labels.tolist() == hidden[pool.labelled].tolist()


def test_cycles_add_exact_budgets_and_pools_never_overlap() -> None:
    pool, oracle, hidden = make_pool(200, 0.1)
    for cycle in range(1, 6):
        budget = pool.budget(0.05)
        assert budget == 10
        chosen = pool.unlabelled[torch.arange(budget) * 3]
        pool.add(chosen)
        labelled, unlabelled = set(pool.labelled.tolist()), set(pool.unlabelled.tolist())
        assert len(labelled) == 20 + 10 * cycle and not labelled & unlabelled
        assert labelled | unlabelled == set(range(200))
        assert pool.labelled[-budget:].tolist() == chosen.tolist()
    # The oracle saw exactly the labelled samples, each once, and no unlabelled one.
    assert sorted(oracle.asked) == sorted(pool.labelled.tolist())
    assert not set(oracle.asked) & set(pool.unlabelled.tolist())
    assert pool.labels.tolist() == hidden[pool.labelled].tolist()
    np.testing.assert_array_equal(pool.class_counts(5).numpy(), np.bincount(hidden[pool.labelled].numpy(), minlength=5))


def test_add_positions_maps_positions_of_the_unlabelled_pool() -> None:
    pool, _, _ = make_pool(50, 0.1)
    unlabelled = pool.unlabelled
    pool.add_positions(torch.tensor([0, 4]))
    assert pool.labelled[-2:].tolist() == [unlabelled[0].item(), unlabelled[4].item()]


def test_budget_larger_than_the_unlabelled_pool_names_the_key() -> None:
    pool, _, _ = make_pool(20, 0.9)
    with pytest.raises(
        ValueError, match=r"'kafal.al-budget-fraction' = 0.2 asks for 4 of 20 samples but only 2 remain"
    ):
        pool.budget(0.2)


def test_relabelling_duplicates_and_out_of_range_are_refused_without_asking_the_oracle() -> None:
    pool, oracle, _ = make_pool(50, 0.1)
    asked = len(oracle.asked)
    with pytest.raises(ValueError, match="already labelled"):
        pool.add(pool.labelled[:1])
    free = pool.unlabelled[0]
    with pytest.raises(ValueError, match="duplicates"):
        pool.add(torch.stack([free, free]))
    with pytest.raises(ValueError, match=r"must be in \[0, 50\)"):
        pool.add(torch.tensor([50]))
    assert len(oracle.asked) == asked


def test_round_trip_through_arrays_does_not_ask_again() -> None:
    pool, oracle, _ = make_pool(60, 0.1)
    pool.add(pool.unlabelled[:3])
    asked = len(oracle.asked)
    saved = pool.to_arrays()
    rebuilt = ActivePool.from_arrays(60, saved["labelled"], saved["labels"], oracle)
    assert rebuilt.labelled.tolist() == pool.labelled.tolist()
    assert rebuilt.labels.tolist() == pool.labels.tolist()
    assert rebuilt.unlabelled.tolist() == pool.unlabelled.tolist()
    assert len(oracle.asked) == asked


def test_an_oracle_returning_the_wrong_number_of_labels_is_an_error() -> None:
    pool = ActivePool(10, lambda idx: torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match="returned 1 labels for 3 samples"):
        pool.add(torch.tensor([1, 2, 3]))
