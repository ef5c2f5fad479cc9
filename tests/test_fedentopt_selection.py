"""FedEntOpt selection against a literal transcription of Algorithm 1, and the fast greedy against the reference."""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pytest

from strategies.fedentopt_selection import buffer_capacity, select_fedentopt, select_fedentopt_reference
from strategies.label_entropy import label_entropy_bits, labels_covered


def algorithm_1(
    l: dict[int, np.ndarray],  # noqa: E741 (the paper's names)
    K: list[int],
    M: int,
    B: list[int],
    Q: int,
    first: int,
) -> tuple[list[int], list[int]]:
    """Algorithm 1 of the paper, line by line, with plain Python loops; ``first`` replaces line 9's draw."""
    C = len(next(iter(l.values())))
    L = [0.0] * C
    S: list[int] = []
    A = set(K)
    for _ in range(M):
        A = A - set(B)
        if not A:
            break
        if S:

            def entropy(v):
                s = sum(v)
                return -sum((x / s) * math.log2(x / s) for x in v if x > 0) if s > 0 else 0.0

            best, j_star = -1.0, None
            for j in sorted(A):
                h = entropy([L[c] + l[j][c] for c in range(C)])
                if h > best + 1e-12:
                    best, j_star = h, j
        else:
            j_star = first
        if len(B) >= Q:
            B.pop(0)
        B.append(j_star)
        L = [L[c] + l[j_star][c] for c in range(C)]
        S.append(j_star)
        A = A - {j_star}
    return S, B


class FirstDraw:
    """An rng whose first draw is fixed (to line up with the reference implementation)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def integers(self, n: int) -> int:
        return self.index


@pytest.mark.parametrize("seed", range(8))
def test_same_cohorts_and_buffer_as_algorithm_1(seed: int) -> None:
    rng = np.random.default_rng(seed)
    K, C, M = 40, 10, 6
    counts = {k: rng.integers(0, 50, C) * (rng.random(C) < 0.3) for k in range(K)}
    Q = int(rng.integers(1, K - M + 1))
    buffer: deque[int] = deque()
    reference_buffer: list[int] = []
    for _ in range(5):  # five rounds, the buffer carried over
        open_ids = sorted(set(range(K)) - set(buffer))
        first_index = int(rng.integers(len(open_ids)))
        ours = select_fedentopt(counts, list(range(K)), M, buffer, Q, FirstDraw(first_index))
        theirs, reference_buffer = algorithm_1(counts, list(range(K)), M, reference_buffer, Q, open_ids[first_index])
        assert ours == theirs
        assert list(buffer) == reference_buffer


def test_buffer_blocks_recent_clients_and_releases_the_oldest() -> None:
    counts = {k: np.eye(4)[k % 4] * 10 for k in range(8)}
    buffer: deque[int] = deque()
    first = select_fedentopt(counts, range(8), 2, buffer, capacity=3, rng=np.random.default_rng(0))
    assert list(buffer) == first
    second = select_fedentopt(counts, range(8), 2, buffer, capacity=3, rng=np.random.default_rng(1))
    assert not set(first) & set(second)
    assert len(buffer) == 3 and buffer[0] == first[1]  # first[0], the oldest, has left


def test_greedy_completes_the_label_distribution() -> None:
    # Two labels per client (#C=2): the cohort of 5 should cover all 10 labels, entropy log2(10).
    counts = {k: np.bincount([k % 10, (k + 5) % 10], minlength=10) * 20 for k in range(50)}
    counts.update({k: np.bincount([k % 10, (k + 1) % 10], minlength=10) * 20 for k in range(50, 100)})
    cohort = select_fedentopt(counts, range(100), 5, deque(), 50, np.random.default_rng(3))
    total = sum(counts[k] for k in cohort)
    assert labels_covered(total) == 10 and label_entropy_bits(total) == pytest.approx(math.log2(10))


def test_fewer_available_than_requested() -> None:
    counts = {k: np.ones(3) for k in range(5)}
    buffer: deque[int] = deque([0, 1])
    assert sorted(select_fedentopt(counts, [0, 1, 2, 3], 4, buffer, 10, np.random.default_rng(0))) == [2, 3]
    assert select_fedentopt(counts, [], 4, deque(), 10, np.random.default_rng(0)) == []


def test_seeded_selection_is_deterministic() -> None:
    counts = {k: np.random.default_rng(k).integers(0, 9, 6) for k in range(30)}
    a = select_fedentopt(counts, range(30), 4, deque(), 10, np.random.default_rng(5))
    b = select_fedentopt(counts, range(30), 4, deque(), 10, np.random.default_rng(5))
    assert a == b


def test_entropy_in_bits_and_coverage() -> None:
    assert label_entropy_bits(np.array([5, 5, 0, 0])) == pytest.approx(1.0)
    assert label_entropy_bits(np.zeros(3)) == 0.0
    np.testing.assert_allclose(label_entropy_bits(np.array([[1, 1, 1, 1], [1, 0, 0, 0]])), [2.0, 0.0])
    assert labels_covered(np.array([0, 3, 0, 1])) == 2
    assert buffer_capacity(0.5, 100) == 50


def count_matrix(kind: str, rng: np.random.Generator, num_clients: int, num_classes: int) -> dict[int, np.ndarray]:
    """Label counts with exact ties: duplicated clients, all-zero clients, label-permuted copies.

    ``sparse``: a few labels per client; ``dp``: the same with Laplace(1/ε = 2) noise clipped at 0 (fractional,
    mostly nonzero); ``near_ties``: counts near 10¹² that differ by up to 10⁷, so many entropies differ by
    less than the 1e-12 bits tie tolerance and some by about that much.
    """
    if kind == "near_ties":
        rows = 1e12 + rng.integers(0, 4, (num_clients, num_classes)) * rng.integers(1, 10**7, num_classes)
    else:
        rows = rng.integers(1, 500, (num_clients, num_classes)) * (rng.random((num_clients, num_classes)) < 0.25)
        rows = rows.astype(np.float64)
        if kind == "dp":
            rows = np.clip(rows + rng.laplace(0.0, 2.0, rows.shape), 0.0, None)
    rows[rng.random(num_clients) < 0.05] = 0.0
    copies = rng.random(num_clients) < 0.2
    rows[copies] = rows[rng.integers(0, num_clients, copies.sum())]
    permuted = rng.random(num_clients) < 0.1
    rows[permuted] = rows[permuted][:, rng.permutation(num_classes)]
    return {k: rows[k] for k in range(num_clients)}


@pytest.mark.parametrize("kind", ["sparse", "dp", "near_ties"])
@pytest.mark.parametrize("seed", range(6))
def test_fast_selection_equals_the_reference_over_many_rounds(kind: str, seed: int) -> None:
    rng = np.random.default_rng([seed, len(kind)])
    num_clients = int(rng.integers(20, 300))
    num_classes = int(rng.choice([2, 3, 10, 20]))
    counts = count_matrix(kind, rng, num_clients, num_classes)
    size = int(rng.integers(1, max(2, num_clients // 5)))
    capacity = int(rng.integers(1, num_clients))
    fast_buffer: deque[int] = deque()
    reference_buffer: deque[int] = deque()
    fast_rng, reference_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(25):
        available = sorted(rng.choice(num_clients, int(rng.integers(1, num_clients + 1)), replace=False).tolist())
        fast = select_fedentopt(counts, available, size, fast_buffer, capacity, fast_rng)
        reference = select_fedentopt_reference(counts, available, size, reference_buffer, capacity, reference_rng)
        assert fast == reference
        assert fast_buffer == reference_buffer
    assert fast_rng.bit_generator.state == reference_rng.bit_generator.state


def test_exact_ties_go_to_the_lowest_id() -> None:
    # After client 0 ([10, 0]), clients 1 and 2 tie at 1 bit; after 1, clients 2 and 3 tie at H(1/3, 2/3).
    counts = {0: np.array([10.0, 0.0]), 1: np.array([0.0, 10.0]), 2: np.array([0.0, 10.0]), 3: np.array([10.0, 0.0])}
    assert select_fedentopt(counts, [3, 2, 1, 0], 4, deque(), 10, FirstDraw(0)) == [0, 1, 2, 3]
    assert select_fedentopt(counts, [0, 1, 2, 3], 3, deque(), 10, FirstDraw(3)) == [3, 1, 0]


def test_all_zero_clients_first() -> None:
    # After the all-zero client 0 the cohort is empty: client 1 scores 0 like client 2's one label; client 3
    # has 1 bit. Then client 1 keeps [1, 1] at 1 bit and wins over client 2.
    counts = {0: np.zeros(2), 1: np.zeros(2), 2: np.array([1.0, 0.0]), 3: np.array([1.0, 1.0])}
    assert select_fedentopt(counts, range(4), 4, deque(), 10, FirstDraw(0)) == [0, 3, 1, 2]
    assert select_fedentopt(counts, range(4), 2, deque(), 10, FirstDraw(0)) == [0, 3]


@pytest.mark.filterwarnings("ignore:invalid value encountered in log2")  # the reference on a chosen row
def test_negative_counts_select_as_the_reference() -> None:
    # Outside the fast path's domain (counts are clipped at zero in a run): the reference's scores are used.
    # After client 0 the cohort's sum is negative; client 3 makes it [6, 6] (1 bit), then 1 beats 2.
    counts = {0: np.array([0.0, -1.0]), 1: np.array([3.0, 6.0]), 2: np.array([0.0, 7.0]), 3: np.array([6.0, 7.0])}
    fast = select_fedentopt(counts, range(4), 4, deque(), 10, FirstDraw(0))
    assert fast == select_fedentopt_reference(counts, range(4), 4, deque(), 10, FirstDraw(0)) == [0, 3, 1, 2]


def test_a_subnormal_cohort_total_does_not_reselect_a_client() -> None:
    # After client 0 the cohort's sum is 5e-324: the error bound is infinite, so every row is rescored exactly;
    # all score 0 bits, and the lowest row still open (client 1) wins, not the chosen client 0.
    counts = {0: np.array([5e-324, 0.0]), 1: np.array([3.0, 0.0]), 2: np.array([0.0, 4.0])}
    assert select_fedentopt(counts, range(3), 3, deque(), 10, FirstDraw(0)) == [0, 1, 2]
