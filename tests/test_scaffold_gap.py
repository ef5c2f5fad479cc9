"""benchmarks/scaffold_gap.py: the no-c arm's correction, and the decomposition's pairs add up to the gap."""

from __future__ import annotations

import torch

from benchmarks.scaffold_gap import ARMS, PAIRS, paired, zero_correction


def test_the_no_c_correction_is_zero_with_c_s_names_and_shapes() -> None:
    c = {"w": torch.ones(2, 3), "b": torch.full((3,), 2.0)}
    c_i = {"w": torch.zeros(2, 3), "b": torch.ones(3)}
    zero = zero_correction(c, c_i)
    assert set(zero) == {"w", "b"}
    assert all(torch.equal(zero[k], torch.zeros_like(c[k])) for k in c)


def test_the_three_steps_chain_from_fedavg_to_scaffold() -> None:
    steps = [("fedavg-m0", "fedavg"), ("scaffold-no-c", "fedavg-m0"), ("scaffold", "scaffold-no-c")]
    assert all(step in PAIRS for step in steps) and ("scaffold", "fedavg") in PAIRS
    assert {arm for pair in PAIRS for arm in pair} <= set(ARMS)
    results = {
        "fedavg": {0: {"final": 0.70}, 1: {"final": 0.60}},
        "fedavg-m0": {0: {"final": 0.66}, 1: {"final": 0.59}},
        "scaffold-no-c": {0: {"final": 0.65}, 1: {"final": 0.60}},
        "scaffold": {0: {"final": 0.64}, 1: {"final": 0.62}},
    }
    total = paired(results, "scaffold", "fedavg", "final")["per_seed"]
    parts = [paired(results, a, b, "final")["per_seed"] for a, b in steps]
    assert [round(sum(p[i] for p in parts), 2) for i in range(2)] == total == [-6.0, 2.0]
    assert paired(results, "scaffold", "fedavg", "final")["ahead"] == 1
