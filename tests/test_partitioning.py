"""Partitioning with flwr-datasets: sizes, minimum size, label skew, determinism, the server's share."""

from __future__ import annotations

import numpy as np
import pytest

from data.partitioning import PartitioningError, SplitDrawError, partition_indices, split_public

LABELS = np.repeat(np.arange(10), 300)  # 3,000 samples, 10 balanced classes


def covers_exactly_once(parts: list[np.ndarray], n: int) -> bool:
    joined = np.concatenate(parts)
    return len(joined) == n and len(np.unique(joined)) == n


@pytest.mark.parametrize("scheme", ["dirichlet", "pathological", "iid"])
def test_every_sample_goes_to_exactly_one_client(scheme: str) -> None:
    parts = partition_indices(LABELS, 10, scheme, alpha=0.5, classes_per_client=2, seed=1)
    assert len(parts) == 10
    if scheme == "pathological":  # classes nobody drew stay unassigned
        joined = np.concatenate(parts)
        assert len(np.unique(joined)) == len(joined)
    else:
        assert covers_exactly_once(parts, len(LABELS))


def test_dirichlet_respects_minimum_partition_size() -> None:
    parts = partition_indices(LABELS, 10, "dirichlet", alpha=0.3, min_size=100, seed=3)
    assert min(len(p) for p in parts) >= 100


def test_dirichlet_small_alpha_gives_label_skew() -> None:
    skewed = partition_indices(LABELS, 10, "dirichlet", alpha=0.1, seed=0)
    mild = partition_indices(LABELS, 10, "dirichlet", alpha=100.0, seed=0)

    def mean_labels_present(parts: list[np.ndarray]) -> float:
        return float(np.mean([len(np.unique(LABELS[p])) for p in parts]))

    assert mean_labels_present(skewed) < 6 < mean_labels_present(mild)


def test_self_balancing_evens_out_partition_sizes() -> None:
    def mean_largest(self_balancing: bool) -> float:
        return float(
            np.mean(
                [
                    max(
                        len(p)
                        for p in partition_indices(
                            LABELS, 10, "dirichlet", alpha=0.1, self_balancing=self_balancing, seed=s
                        )
                    )
                    for s in range(4)
                ]
            )
        )

    assert mean_largest(True) < mean_largest(False)


def test_pathological_gives_k_labels_per_client() -> None:
    parts = partition_indices(LABELS, 10, "pathological", classes_per_client=2, seed=0)
    assert all(len(np.unique(LABELS[p])) == 2 for p in parts)


def test_iid_sizes_differ_by_at_most_one() -> None:
    sizes = [len(p) for p in partition_indices(np.arange(1003) % 10, 10, "iid", seed=0)]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("scheme", ["dirichlet", "pathological", "iid"])
def test_deterministic_for_a_seed(scheme: str) -> None:
    a = partition_indices(LABELS, 8, scheme, alpha=0.3, seed=7)
    b = partition_indices(LABELS, 8, scheme, alpha=0.3, seed=7)
    c = partition_indices(LABELS, 8, scheme, alpha=0.3, seed=8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_impossible_minimum_size_names_the_key() -> None:
    with pytest.raises(PartitioningError, match="min-partition-size = 400"):
        partition_indices(LABELS, 10, "dirichlet", min_size=400)


def test_a_dirichlet_draw_that_never_meets_the_minimum_is_a_draw_error() -> None:
    """100 x 25 <= 3,000 samples is possible on its face, but Dir(0.1) leaves some client below 25 in every attempt."""
    with pytest.raises(
        SplitDrawError, match=r"cannot split 3000 samples over 100 clients with dirichlet \(dirichlet-alpha"
    ):
        partition_indices(LABELS, 100, "dirichlet", alpha=0.1, min_size=25, seed=0)


def test_more_classes_per_client_than_labels_is_refused() -> None:
    with pytest.raises(PartitioningError, match="classes-per-client = 11"):
        partition_indices(LABELS, 10, "pathological", classes_per_client=11)


def test_public_split_is_stratified_and_disjoint() -> None:
    clients, public = split_public(LABELS, 0.1, seed=0)
    assert len(public) == 300 and len(clients) == 2700
    assert not set(clients) & set(public)
    assert np.array_equal(np.bincount(LABELS[public]), np.full(10, 30))
    again_clients, again_public = split_public(LABELS, 0.1, seed=0)
    assert np.array_equal(public, again_public) and np.array_equal(clients, again_clients)


def test_public_fraction_zero_keeps_everything_for_clients() -> None:
    clients, public = split_public(LABELS, 0.0, seed=0)
    assert len(public) == 0 and len(clients) == len(LABELS)


@pytest.mark.parametrize(
    "scheme, clients, alpha, min_size",
    [("dirichlet", 10, 0.5, 10), ("dirichlet", 300, 0.1, 0), ("pathological", 50, 0.5, 0), ("iid", 1000, 0.5, 0)],
)
def test_the_table_holds_the_partitions_flwr_datasets_loads_one_by_one(
    scheme: str, clients: int, alpha: float, min_size: int
) -> None:
    from data.partitioning import partition_table

    kw = dict(alpha=alpha, min_size=min_size, classes_per_client=2, seed=4)
    eager = partition_indices(LABELS, clients, scheme, **kw)  # type: ignore[arg-type]
    positions, offsets = partition_table(LABELS, clients, scheme, **kw)  # type: ignore[arg-type]
    assert len(offsets) == clients + 1
    for pid, part in enumerate(eager):
        assert np.array_equal(positions[offsets[pid] : offsets[pid + 1]], part)
