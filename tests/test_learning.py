"""Every method learns in its own runs: each test runs its method on the learns-task (``tests/learning.py``) and
fails when the global model ends at chance, at or below its start, or with a collapse warning. The thresholds are
below what each method reached over seeds 0-2 (given beside each), well above chance (10%)."""

from __future__ import annotations

import pytest

from methods.registry import METHODS
from tests.learning import assert_learns, run_method

#: method -> (run-config overrides, the accuracy its global model must reach)
LEARNS: dict[str, tuple[dict, float]] = {
    "fedavg": ({}, 0.6),
    "fedft-eds": ({"local-epochs": 3}, 0.4),
    # From random weights as the paper (its preset; the task's pretraining overridden): 2 cycles of 2 rounds of
    # 5 epochs, 10% then 15% labelled, each cycle from scratch. Seeds 0/1/2 end at 0.613 / 0.488 / 0.523.
    "kafal": (
        {"pretrain": "none", "al-cycles": 1, "al-rounds-per-cycle": 2, "num-server-rounds": 4, "local-epochs": 5},
        0.4,
    ),
}


def test_every_method_has_a_learns_test():
    assert set(LEARNS) == set(METHODS), f"methods without a learns-test: {sorted(set(METHODS) - set(LEARNS))}"


@pytest.mark.parametrize("method", sorted(LEARNS))
def test_the_method_learns(method, tmp_path, pretrained):
    overrides, at_least = LEARNS[method]
    assert_learns(run_method(tmp_path, pretrained, method=method, **overrides), at_least=at_least)
