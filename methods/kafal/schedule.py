"""The active-learning schedule of a KAFAL run (Alg. 1): cycles of federated rounds, each but the last ending in a
query.

With ``kafal.al-cycles`` = A queries and ``kafal.al-rounds-per-cycle`` = T, the run trains A + 1 cycles of T rounds:
cycle 0 on the initial ``kafal.al-initial-fraction`` of labelled data, cycle a on that plus a query budgets, and the
last cycle on the final labelled share (the paper's 10% → 35% with A = 5 gives its six accuracies, 10%, 15%, …, 35%).
Rounds are numbered from 1 across the run, cycles from 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from methods.kafal.pools import initial_labelled_size, query_budget


@dataclass(frozen=True)
class CycleSchedule:
    """``cycles`` queries (A), each after ``rounds_per_cycle`` rounds (T); A + 1 cycles in all."""

    rounds_per_cycle: int
    cycles: int

    @property
    def total_rounds(self) -> int:
        """(A + 1) · T: what ``num-server-rounds`` must be."""
        return (self.cycles + 1) * self.rounds_per_cycle

    def cycle_of(self, server_round: int) -> int:
        """The 0-based cycle a round belongs to."""
        return (server_round - 1) // self.rounds_per_cycle

    def round_in_cycle(self, server_round: int) -> int:
        """The 1-based position of a round within its cycle (Alg. 2's t)."""
        return (server_round - 1) % self.rounds_per_cycle + 1

    def ends_cycle(self, server_round: int) -> bool:
        """Whether the round is its cycle's last."""
        return server_round % self.rounds_per_cycle == 0

    def queries_after(self, server_round: int) -> bool:
        """Whether the clients query after this round (the last round of every cycle but the final one)."""
        return self.ends_cycle(server_round) and self.cycle_of(server_round) < self.cycles

    def rounds_of(self, cycle: int) -> tuple[int, int]:
        """The first and last round of ``cycle``."""
        return cycle * self.rounds_per_cycle + 1, (cycle + 1) * self.rounds_per_cycle


def labelled_after(num_samples: int, initial_fraction: float, budget_fraction: float, queries: int) -> int:
    """A client's labelled pool after ``queries`` queries: ⌈f₀·n⌉ + queries·⌈b·n⌉."""
    return initial_labelled_size(num_samples, initial_fraction) + queries * query_budget(num_samples, budget_fraction)


def pool_problem(num_samples: int, initial_fraction: float, budget_fraction: float, cycles: int) -> str | None:
    """Why a client of ``num_samples`` cannot run the schedule (its queries would exceed its unlabelled pool)."""
    needed = labelled_after(num_samples, initial_fraction, budget_fraction, cycles)
    if needed <= num_samples:
        return None
    return (
        f"a client of {num_samples} samples would need {needed} labels: ⌈{initial_fraction}·n⌉ initially plus "
        f"{cycles} queries of ⌈{budget_fraction}·n⌉"
    )
