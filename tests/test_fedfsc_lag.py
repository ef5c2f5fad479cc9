"""FedFSC(+)'s gap to its base trainer split into the classifier's gain on the same extractor and the extractor's lag,
with each round's class coverage (experiments/fedfsc_lag.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.cell_results import CellResult
from experiments.fedfsc_lag import (
    cell_row,
    covered_classes,
    decompose,
    markdown,
    read_decompositions,
    write_decomposition_report,
)
from experiments.spec import Cell, parse_experiment

COUNTS = {0: [12, 0, 3], 1: [0, 10, 9], 2: [4, 2, 0]}


def rounds(acc: list[float], base: list[float], fewshot: list[list[int]]) -> list[dict]:
    return [
        {"round": t + 1, "accuracy": a, "base_accuracy": b, "fewshot_clients": f, "fewshot_updates": len(f)}
        for t, (a, b, f) in enumerate(zip(acc, base, fewshot))
    ]


def test_the_gap_is_the_classifier_gain_minus_the_extractor_lag() -> None:
    # Round 2's global model {θ_fs^2, φ^2} sits on the extractor of the round-1 base (0.50): it gains 0.10 over it,
    # but the base itself moved on to 0.65 in round 2, so the global model trails it by 0.05.
    d = decompose(rounds([0.5, 0.6, 0.7], [0.5, 0.65, 0.62], [[], [0, 1], [2]]), COUNTS, 10)
    assert d.gap == pytest.approx((-0.05, 0.08))
    assert d.classifier_gain == pytest.approx((0.10, 0.05))
    assert d.extractor_lag == pytest.approx((0.15, -0.03))
    for gap, gain, lag in zip(d.gap, d.classifier_gain, d.extractor_lag):
        assert gap == pytest.approx(gain - lag)
    assert (d.coverage, d.num_classes) == ((2, 1), 3)
    with pytest.raises(ValueError, match="at least 2 rounds"):
        decompose(rounds([0.5], [0.5], [[]]), COUNTS, 10)


def test_a_class_is_covered_where_some_few_shot_client_holds_n_samples_of_it() -> None:
    assert covered_classes([COUNTS[0], COUNTS[1]], 10) == 2  # class 2: 3 and 9 samples, below n = 10
    assert covered_classes([COUNTS[1]], 9) == 2
    assert covered_classes([COUNTS[2]], 10) == 1  # no class reaches 10: n drops to 4, the code's rule
    assert covered_classes([], 10) == 0


def test_cell_row_averages_each_term_and_splits_the_gain_by_coverage() -> None:
    d = decompose(rounds([0.5, 0.6, 0.7, 0.7], [0.5, 0.65, 0.62, 0.6], [[], [0, 1], [2], [0]]), COUNTS, 3)
    row = cell_row(d, late=2)
    assert row["gap"] == pytest.approx((-0.05 + 0.08 + 0.10) / 3)
    assert row["late_extractor_lag"] == pytest.approx((-0.03 - 0.02) / 2)
    assert row["classifier_wins"] == pytest.approx(1.0)
    assert d.coverage == (3, 1, 2)  # n = 3: clients 0 and 1 hold every class between them
    assert row["full_coverage_gain"] == pytest.approx(0.10)
    assert row["partial_coverage_gain"] == pytest.approx((0.05 + 0.08) / 2)
    assert math.isnan(cell_row(decompose(rounds([0.5, 0.6], [0.5, 0.5], [[], [2]]), COUNTS, 10))["full_coverage_gain"])


def cell(name: str, records: list[dict]) -> tuple[Cell, CellResult]:
    method, alpha, seed = name.split("__")
    files = {"label_counts.json": json.dumps({str(k): v for k, v in COUNTS.items()}).encode()}
    point = (("dirichlet-alpha", float(alpha.split("=")[1])),)
    return Cell(method, point, int(seed[4:]), {}), CellResult({}, records, {"fedfsc.fewshot-shots": 10}, files)


def test_only_cells_with_fewshot_updates_are_read_and_seeds_are_grouped(tmp_path: Path) -> None:
    few = rounds([0.5, 0.6, 0.7], [0.5, 0.65, 0.62], [[], [0, 1], [2]])
    results = dict(
        [
            cell("fedfsc-plus__dirichlet-alpha=0.1__seed1", few),
            cell("fedfsc-plus__dirichlet-alpha=0.1__seed0", few),
            cell("fedavg-plus__dirichlet-alpha=0.1__seed0", rounds([0.5, 0.6], [0.5, 0.6], [[], []])),
        ]
    )
    rows = read_decompositions(results)
    assert list(rows) == ["fedfsc-plus__dirichlet-alpha=0.1__seed0", "fedfsc-plus__dirichlet-alpha=0.1__seed1"]
    table = markdown(rows).splitlines()
    assert len(table) == 3
    assert table[2].startswith("| fedfsc-plus__dirichlet-alpha=0.1 | 2 | +1.5 ± 0.0 | +7.5 ± 0.0 | +6.0 ± 0.0 |")
    assert table[2].endswith("| 100% ± 0.0 | 1.5 ± 0.0 |")
    experiment = parse_experiment(
        {"description": "d", "cost": "c", "methods": ["fedavg"]}, tmp_path / "fedfsc-stragglers.yaml"
    )
    assert write_decomposition_report(experiment, results, tmp_path) == [tmp_path / "decomposition.md"]
    text = (tmp_path / "decomposition.md").read_text()
    assert text.startswith("# fedfsc-stragglers: FedFSC(+) against its base trainer") and text.endswith(table[2] + "\n")
    no_fewshot = {c: r for c, r in results.items() if c.method == "fedavg-plus"}
    assert write_decomposition_report(experiment, no_fewshot, tmp_path / "none") == []
