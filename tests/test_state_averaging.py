"""Uniform and weighted averaging of model states."""

from __future__ import annotations

import pytest
import torch

from methods.common.state_averaging import average_states


def test_weighted_and_uniform_means() -> None:
    a = {"w": torch.tensor([1.0, 2.0]), "steps": torch.tensor(3)}
    b = {"w": torch.tensor([3.0, 6.0]), "steps": torch.tensor(4)}
    uniform = average_states([a, b])
    assert uniform["w"].tolist() == [2.0, 4.0] and uniform["steps"].item() == 4  # 3.5 rounds half to even
    weighted = average_states([a, b], [1, 3])
    assert weighted["w"].tolist() == [2.5, 5.0] and weighted["steps"].dtype == torch.int64


@pytest.mark.parametrize(
    ("states", "weights", "match"),
    [
        ([], None, "no states"),
        ([{"w": torch.zeros(1)}, {"v": torch.zeros(1)}], None, "keys"),
        ([{"w": torch.zeros(1)}], [1.0, 2.0], "2 weights for 1 states"),
        ([{"w": torch.zeros(1)}], [0.0], "positive sum"),
    ],
)
def test_bad_input_is_refused(states: list, weights: list | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        average_states(states, weights)
