"""The ServerApp's wiring: selection policy, FedEntOpt's buffer check, the learning-rate schedule."""

from __future__ import annotations

import numpy as np
import pytest

from run_config import ConfigError
from server_app.lifecycle import cohort_policy, learning_rate_schedule
from strategies.fedentopt_selection import FedEntOptSelector
from strategies.label_counts import LabelCountRegistry
from strategies.population_check import check_population
from tests.conftest import make_config


def registry() -> LabelCountRegistry:
    reg = LabelCountRegistry(num_classes=2, noisy=False)
    reg.counts.update({pid: np.array([pid % 2, 1 - pid % 2], dtype=float) for pid in range(100)})
    return reg


def test_random_policy_is_seeded_by_round() -> None:
    select = cohort_policy(make_config(fraction_train=0.1), registry(), 100)
    assert select(list(range(100)), 3) == select(list(range(100)), 3) != select(list(range(100)), 4)
    assert len(select(list(range(100)), 3)) == 10


def test_fedentopt_policy_gets_q_from_the_population() -> None:
    select = cohort_policy(
        make_config(client_selection="fedentopt", fraction_train=0.1, fedentopt_buffer=0.5), registry(), 100
    )
    assert isinstance(select, FedEntOptSelector) and select.capacity == 50
    cohort = select(list(range(100)), 1)
    assert len(cohort) == 10 and list(select.buffer) == cohort


@pytest.mark.parametrize("fraction", [0.95, 0.001])
def test_fedentopt_buffer_out_of_range_names_the_key(fraction: float) -> None:
    config = make_config(client_selection="fedentopt", fraction_train=0.1, fedentopt_buffer=fraction)
    with pytest.raises(ConfigError, match="'fedentopt-buffer' = .* FedEntOpt needs 1 ≤ Q ≤ K − M = 90"):
        check_population(config, 100)


def test_learning_rate_decays_per_round() -> None:
    schedule = learning_rate_schedule(make_config(learning_rate=0.01, lr_decay=0.98))
    assert schedule(1)["learning-rate"] == pytest.approx(0.01)
    assert schedule(3)["learning-rate"] == pytest.approx(0.01 * 0.98**2)
