"""FedEntOpt's client selection (Lutz et al., Algorithm 1; SPEC §6).

The first client is drawn uniformly from the available clients that are not in the FIFO buffer B; each
next one maximises the entropy (bits) of the cohort's combined label counts L + l⁽ʲ⁾. Every selected client
is appended to B at once, the oldest leaving when B holds Q; the clients in B at any step cannot be chosen,
so recently selected clients sit out for a while.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def _entropies_with(total: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """H((L + l_j) / ‖L + l_j‖₁) in bits for every row j, as log₂ s − Σ_c T_c log₂ T_c / s with T = L + l_j."""
    t = matrix + total
    s = t.sum(axis=1)
    t_log_t = t * np.log2(t + (t == 0))  # 0 · log 0 = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.log2(s) - t_log_t.sum(axis=1) / s
    return np.where(s > 0, h, 0.0)


def select_fedentopt(
    counts: Mapping[int, np.ndarray],
    available: Sequence[int],
    size: int,
    buffer: deque[int],
    capacity: int,
    rng: np.random.Generator,
) -> list[int]:
    """Select up to ``size`` partition ids from ``available``; ``buffer`` is updated in place.

    Candidates are scanned in ascending partition id, so an entropy tie (within 1e-12 bits) goes to the
    lowest id. Fewer than ``size`` are returned when the buffer leaves fewer candidates.
    """
    if capacity < 1:
        raise ValueError(f"buffer capacity must be >= 1, got {capacity}")
    # Line 5 of Algorithm 1, A <- A \ B: the clients picked below enter B and are masked as they are
    # picked, and clients leaving B during this round do not return to A, so B is applied once here.
    blocked = set(buffer)
    ids = np.array(sorted(k for k in available if k not in blocked), dtype=np.int64)
    if len(ids) == 0:
        return []
    matrix = np.stack([np.asarray(counts[i], dtype=np.float64) for i in ids])
    candidate = np.ones(len(ids), dtype=bool)
    total = np.zeros(matrix.shape[1])
    chosen: list[int] = []
    for _ in range(size):
        if not candidate.any():
            break
        if chosen:
            scores = np.where(candidate, _entropies_with(total, matrix), -np.inf)
            row = int(np.flatnonzero(scores >= scores.max() - 1e-12)[0])
        else:
            open_rows = np.flatnonzero(candidate)
            row = int(open_rows[rng.integers(len(open_rows))])
        if len(buffer) >= capacity:
            buffer.popleft()
        buffer.append(int(ids[row]))
        total += matrix[row]
        chosen.append(int(ids[row]))
        candidate[row] = False
    return chosen


def buffer_capacity(fraction: float, num_clients: int) -> int:
    """Q as a share of the K clients, rounded."""
    return int(round(fraction * num_clients))


class FedEntOptSelector:
    """Algorithm 1 as a selection policy for ``CohortFedAvg``: holds the buffer and the seeded generator."""

    def __init__(self, counts: Mapping[int, np.ndarray], cohort_size: Callable[[int], int], capacity: int, seed: int) -> None:
        self.counts = counts
        self.cohort_size = cohort_size
        self.capacity = capacity
        self.buffer: deque[int] = deque()
        self.rng = np.random.default_rng([seed, 0xE17])

    def __call__(self, available: list[int], server_round: int) -> list[int]:
        return select_fedentopt(self.counts, available, self.cohort_size(len(available)), self.buffer, self.capacity, self.rng)

    def state_dict(self) -> dict[str, Any]:
        """The buffer and the generator's state, for checkpoints."""
        return {"buffer": list(self.buffer), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = deque(int(pid) for pid in state["buffer"])
        self.rng.bit_generator.state = state["rng"]
