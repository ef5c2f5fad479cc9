"""Label counts: the client's vector and its noise, the server's checks, clipping and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from client_app.label_counts import label_count_vector, privatise
from strategies.label_counts import LABEL_COUNTS, LabelCountRegistry, check_counts
from tests.fake_grid import FakeGrid, client_responders

NODES = {10: 0, 20: 1, 30: 2, 40: 3}


def test_count_vector() -> None:
    assert label_count_vector(np.array([0, 2, 2, 3]), 5).tolist() == [1, 0, 2, 1, 0]


def test_laplace_noise_has_scale_one_over_epsilon() -> None:
    rng = np.random.default_rng(0)
    noise = np.concatenate([privatise(np.zeros(10), 0.5, rng) for _ in range(20_000)])
    # Laplace(0, b): mean 0, mean absolute deviation b = 1/ε = 2, variance 2b² = 8
    assert abs(noise.mean()) < 0.05
    assert np.mean(np.abs(noise)) == pytest.approx(2.0, rel=0.02)
    assert noise.var() == pytest.approx(8.0, rel=0.03)
    assert privatise(np.ones(3), 0.0, rng).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("values", "noisy", "problem"),
    [
        ([1, 2], False, "2 values for 3 labels"),
        ([1, -2, 3], False, "negative or fractional"),
        ([1, 2.5, 3], False, "negative or fractional"),
        ([1, float("inf"), 3], True, "non-finite"),
        ([1, -2.5, 3], True, None),
        ([1, 2, 3], False, None),
    ],
)
def test_checks(values: list[float], noisy: bool, problem: str | None) -> None:
    result = check_counts(np.array(values, dtype=float), 3, noisy)
    assert (result is None) if problem is None else (problem in result)


def test_registry_asks_once_refuses_bad_vectors_and_clips_noise(caplog) -> None:
    counts = {0: [3, 0, 1], 1: [1, 2], 2: [-1.5, 4.2, 0.3], 3: [0, 0, 9]}
    grid = FakeGrid(NODES, client_responders(NODES, counts))
    registry = LabelCountRegistry(num_classes=3, noisy=True)
    registry.collect(grid, {pid: node for node, pid in NODES.items()})
    assert registry.refused == {1}
    assert registry.counts[2].tolist() == [0.0, 4.2, 0.3]  # clipped at zero
    assert registry.usable([0, 1, 2, 3]) == [0, 2, 3]
    assert "partition 1 sent unusable label counts (2 values for 3 labels)" in caplog.text
    registry.collect(grid, {pid: node for node, pid in NODES.items()})
    assert sum(m.metadata.message_type == LABEL_COUNTS for m in grid.sent) == 4  # nobody asked twice
    assert registry.as_json()["3"] == [0.0, 0.0, 9.0]
    assert registry.total([0, 3]).tolist() == [3.0, 0.0, 10.0]


def test_without_dp_negative_counts_are_refused() -> None:
    grid = FakeGrid({10: 0}, client_responders({10: 0}, {0: [-1, 2, 3]}))
    registry = LabelCountRegistry(num_classes=3, noisy=False)
    registry.collect(grid, {0: 10})
    assert registry.refused == {0} and registry.counts == {}
