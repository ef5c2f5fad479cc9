"""FedEntOpt selection against a literal transcription of Algorithm 1."""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pytest

from strategies.fedentopt_selection import buffer_capacity, select_fedentopt
from strategies.label_entropy import label_entropy_bits, labels_covered


def algorithm_1(l: dict[int, np.ndarray], K: list[int], M: int, B: list[int], Q: int, first: int) -> tuple[list[int], list[int]]:
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
