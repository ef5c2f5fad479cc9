"""FedEntOpt's client selection (Lutz et al., Algorithm 1).

The first client is drawn uniformly from the available clients that are not in the FIFO buffer B; each
next one maximises the entropy (bits) of the cohort's combined label counts L + l⁽ʲ⁾. Every selected client
is appended to B at once, the oldest leaving when B holds Q; the clients in B at any step cannot be chosen,
so recently selected clients sit out for a while.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def _entropies_with(total: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """H((L + l_j) / ‖L + l_j‖₁) in bits for every row j, as log₂ s − Σ_c T_c log₂ T_c / s, T = L + l_j."""
    t = matrix + total
    s = t.sum(axis=1)
    t_log_t = t * np.log2(t + (t == 0))  # 0 · log 0 = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.log2(s) - t_log_t.sum(axis=1) / s
    return np.where(s > 0, h, 0.0)


def _x_log2_x(x: np.ndarray) -> np.ndarray:
    """x · log₂ x elementwise, with 0 · log₂ 0 = 0."""
    return x * np.log2(np.where(x > 0, x, 1.0))


def _open_clients(
    counts: Mapping[int, np.ndarray], available: Sequence[int], buffer: deque[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Ascending ids of the available clients not in the buffer, and their label counts as rows (float64)."""
    # Line 5 of Algorithm 1, A <- A \ B: the clients picked below enter B and are masked as they are
    # picked, and clients leaving B during this round do not return to A, so B is applied once here.
    ids = np.asarray(available, dtype=np.int64).reshape(-1)
    ids = np.sort(ids[~np.isin(ids, np.fromiter(buffer, dtype=np.int64, count=len(buffer)))])
    if len(ids) == 0:
        return ids, np.zeros((0, 0))
    return ids, np.array([counts[pid] for pid in ids.tolist()], dtype=np.float64)


def _enter_buffer(buffer: deque[int], capacity: int, chosen: list[int]) -> None:
    """Append the cohort to the FIFO buffer in selection order, the oldest leaving when it holds ``capacity``."""
    for pid in chosen:
        if len(buffer) >= capacity:
            buffer.popleft()
        buffer.append(pid)


def _first_near_best(scores: np.ndarray) -> int:
    """The lowest row whose score is within 1e-12 bits of the best (rows not to be chosen hold -inf)."""
    return int(np.flatnonzero(scores >= scores.max() - 1e-12)[0])


def select_fedentopt_reference(
    counts: Mapping[int, np.ndarray],
    available: Sequence[int],
    size: int,
    buffer: deque[int],
    capacity: int,
    rng: np.random.Generator,
) -> list[int]:
    """``select_fedentopt`` recomputing every candidate's entropy at each greedy step (O(M·K·C)).

    The definition the fast version must match selection for selection; kept for tests and the benchmark.
    """
    if capacity < 1:
        raise ValueError(f"buffer capacity must be >= 1, got {capacity}")
    ids, matrix = _open_clients(counts, available, buffer)
    if len(ids) == 0:
        return []
    chosen = [int(ids[row]) for row in _greedy_rows_reference(matrix, size, rng)]
    _enter_buffer(buffer, capacity, chosen)
    return chosen


def _greedy_rows_reference(matrix: np.ndarray, size: int, rng: np.random.Generator) -> list[int]:
    """Rows of ``matrix`` in selection order: the first drawn at random, then greedily by exact entropy."""
    candidate = np.ones(len(matrix), dtype=bool)
    total = np.zeros(matrix.shape[1])
    rows: list[int] = []
    for _ in range(min(size, len(matrix))):
        if rows:
            row = _first_near_best(np.where(candidate, _entropies_with(total, matrix), -np.inf))
        else:
            row = int(rng.integers(len(matrix)))
        total += matrix[row]
        rows.append(row)
        candidate[row] = False
    return rows


def select_fedentopt(
    counts: Mapping[int, np.ndarray],
    available: Sequence[int],
    size: int,
    buffer: deque[int],
    capacity: int,
    rng: np.random.Generator,
) -> list[int]:
    """Select up to ``size`` partition ids from ``available``; ``buffer`` is updated in place.

    Candidates are ranked in ascending partition id, so an entropy tie (within 1e-12 bits) goes to the
    lowest id. Fewer than ``size`` are returned when the buffer leaves fewer candidates. Same selections as
    ``select_fedentopt_reference``, in about O(K) per greedy step instead of O(K·C) with large temporaries.
    """
    if capacity < 1:
        raise ValueError(f"buffer capacity must be >= 1, got {capacity}")
    ids, matrix = _open_clients(counts, available, buffer)
    if len(ids) == 0:
        return []
    if np.all(matrix >= 0) and matrix.sum() <= 1e300:
        rows = _greedy_rows(matrix, size, rng)
    else:  # negative, NaN or overflowing counts: no bound on the fast scores' error, so no shortcut
        rows = _greedy_rows_reference(matrix, size, rng)
    chosen = [int(ids[row]) for row in rows]
    _enter_buffer(buffer, capacity, chosen)
    return chosen


class _LabelColumn:
    """One label c of the candidates: their nonzero counts l_jc (all rows when most are nonzero) and the
    current terms f(L_c + l_jc) − f(L_c) with f(x) = x log₂ x, which are zero where l_jc = 0."""

    def __init__(self, column: np.ndarray, column_x_log_x: np.ndarray) -> None:
        nonzero = np.flatnonzero(column)
        self.rows: np.ndarray | slice = nonzero if 3 * len(nonzero) < len(column) else slice(None)
        self.values = column[self.rows]
        self.terms = column_x_log_x[self.rows]

    def move_to(self, level: float, level_term: float, partial: np.ndarray) -> None:
        """Set L_c to ``level`` > 0 (f(L_c) = ``level_term``); add each candidate's change of term to ``partial``."""
        raised = self.values + level
        new_terms = raised * np.log2(raised) - level_term
        partial[self.rows] += new_terms - self.terms
        self.terms = new_terms


def _score_error_bound(steps: int, level_sum: float, largest_sum: float, num_classes: int) -> float:
    """A bound on |fast − exact| entropy (bits) after ``steps`` incremental updates, with a safety factor 64.

    Each update adds rounding of a few ulps of f(L_c + l_jc) ≤ (L_c + l_jc)·|log₂ s_j| + 1 per label to a
    candidate's partial sum; divided by s_j ≥ L's sum, that is a few ulps of |log₂ s_j| + C / s_j per step.
    """
    logs = abs(math.log2(largest_sum)) + abs(math.log2(level_sum))
    return 64 * sys.float_info.epsilon * (steps + 2) * (logs + num_classes / level_sum + 2)


def _fast_scores(
    level_sum: float,
    level_terms: float,
    row_sums: np.ndarray,
    partial: np.ndarray,
    sums: np.ndarray,
    scores: np.ndarray,
) -> None:
    """``scores`` = log₂ s_j − (G + P_j) / s_j with s_j = Σ L + Σ l_j, G = ``level_terms``, P = ``partial``.

    Written into preallocated arrays: at 10⁵ rows fresh temporaries cost about as much again as the arithmetic.
    """
    np.add(row_sums, level_sum, out=sums)
    np.add(partial, level_terms, out=scores)
    np.divide(scores, sums, out=scores)
    np.subtract(np.log2(sums, out=sums), scores, out=scores)


def _greedy_rows(matrix: np.ndarray, size: int, rng: np.random.Generator) -> list[int]:
    """``_greedy_rows_reference`` for non-negative finite counts, with incrementally updated entropies.

    H(L + l_j) = log₂ s_j − (G + P_j) / s_j with s_j = Σ L + Σ l_j, G = Σ_c f(L_c) and the partial sum
    P_j = Σ_c [f(L_c + l_jc) − f(L_c)]. Adding client r changes L only in r's labels, so only those
    columns' terms are updated (over the candidates holding the label). The few candidates whose fast
    score is within the error bound of a tie with the best are rescored exactly, as the reference does,
    before the choice, so rounding in the updates cannot change a selection.
    """
    num_rows, num_classes = matrix.shape
    x_log_x = _x_log2_x(matrix)
    partial = x_log_x.sum(axis=1)  # L = 0: P_j = Σ_c f(l_jc)
    row_sums = matrix.sum(axis=1)
    largest_sum = row_sums.max()
    columns = [_LabelColumn(*pair) for pair in zip(np.ascontiguousarray(matrix.T), np.ascontiguousarray(x_log_x.T))]
    sums, scores = np.empty(num_rows), np.empty(num_rows)
    total = np.zeros(num_classes)
    level_terms = np.zeros(num_classes)  # f(L_c)
    rows: list[int] = []
    for _ in range(min(size, num_rows)):
        level_sum = float(total.sum())
        if not rows:
            row = int(rng.integers(num_rows))
        elif level_sum == 0:  # only all-zero clients so far: s_j = 0 happens, score exactly as the reference
            row = _first_near_best(np.where(np.isinf(partial), -np.inf, _entropies_with(total, matrix)))
        else:
            _fast_scores(level_sum, float(level_terms.sum()), row_sums, partial, sums, scores)
            bound = _score_error_bound(len(rows), level_sum, level_sum + largest_sum, num_classes)
            near = (scores >= scores.max() - 1e-12 - 2 * bound).nonzero()[0]
            near = near[np.isfinite(scores[near])]  # chosen rows (-inf) stay out when the bound is infinite
            row = int(near[0])  # alone within the bound, it is the reference's choice
            if len(near) > 1:
                row = int(near[_first_near_best(_entropies_with(total, matrix[near]))])
        previous = total.copy()
        total += matrix[row]
        for label in (total != previous).nonzero()[0]:  # L_c rose (counts are >= 0), so L_c > 0
            level = float(total[label])
            level_terms[label] = level * math.log2(level)
            columns[label].move_to(level, level_terms[label], partial)
        partial[row] = np.inf  # chosen: scores -inf from now on
        rows.append(row)
    return rows


def buffer_capacity(fraction: float, num_clients: int) -> int:
    """Q as a share of the K clients, rounded."""
    return int(round(fraction * num_clients))


class FedEntOptSelector:
    """Algorithm 1 as a selection policy for ``CohortFedAvg``: holds the buffer and the seeded generator."""

    def __init__(
        self, counts: Mapping[int, np.ndarray], cohort_size: Callable[[int], int], capacity: int, seed: int
    ) -> None:
        self.counts = counts
        self.cohort_size = cohort_size
        self.capacity = capacity
        self.buffer: deque[int] = deque()
        self.rng = np.random.default_rng([seed, 0xE17])

    def __call__(self, available: list[int], server_round: int) -> list[int]:
        size = self.cohort_size(len(available))
        return select_fedentopt(self.counts, available, size, self.buffer, self.capacity, self.rng)

    def state_dict(self) -> dict[str, Any]:
        """The buffer and the generator's state, for checkpoints."""
        return {"buffer": list(self.buffer), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = deque(int(pid) for pid in state["buffer"])
        self.rng.bit_generator.state = state["rng"]
