"""The FedFSC suite laid out in the thesis's rows: which cell and accuracy feeds each row, gains paired by seed."""

from __future__ import annotations

from experiments.cell_results import CellResult
from experiments.fedfsc_rows import best_accuracies, markdown, paired_gain, row_values, thesis_rows

CELL = "fedfsc-fedavg__dirichlet-alpha=0.1__seed{}"


def test_rows_read_the_right_cell_and_accuracy_and_gains_are_paired_by_seed() -> None:
    results = {
        f"{CELL.format(0)}|best_base_accuracy": 0.70,
        f"{CELL.format(0)}|best_accuracy": 0.72,
        f"{CELL.format(3)}|best_base_accuracy": 0.60,
        f"{CELL.format(3)}|best_accuracy": 0.61,
        f"{CELL.format(1)}|best_accuracy": 0.99,  # seed 1 has no base accuracy: left out of the paired gain
        "fedfsc-fedavg__dirichlet-alpha=0.5__seed0|best_accuracy": 0.5,  # another α
    }
    base, fsc = thesis_rows("fedavg")[:2]
    assert (base.label, fsc.label, fsc.baseline) == ("FedAvg", "FedFSC(FedAvg)", "FedAvg")
    assert row_values(results, base, "0.1") == {0: 0.70, 3: 0.60}
    assert row_values(results, fsc, "0.1") == {0: 0.72, 1: 0.99, 3: 0.61}
    gains = paired_gain(row_values(results, fsc, "0.1"), row_values(results, base, "0.1"))
    assert [round(g, 10) for g in gains] == [0.02, 0.01]
    table = markdown(results, ["0.1"]).splitlines()
    assert "| 0.1 | FedFSC(FedAvg) | 0, 1, 3 | 77.33 ± 19.55 | FedAvg | +1.50 ± 0.71 | +2.0, +1.0 |" in table
    assert "| 0.1 | FedProx | 0 | not run | | | |" in table
    assert [row.label for row in thesis_rows("fedavg")][-2:] == ["FedAvg w/ FSCProx", "FedFSC+(FedAvg) w/ FSCProx"]


def test_best_accuracies_are_keyed_by_cell_and_summary_field() -> None:
    cells = {
        "b": CellResult({"best_accuracy": 0.5, "best_base_accuracy": 0.4}, [], {}),
        "a": CellResult({"best_accuracy": 0.6, "best_base_accuracy": None}, [], {}),
    }
    assert best_accuracies(cells) == {"a|best_accuracy": 0.6, "b|best_accuracy": 0.5, "b|best_base_accuracy": 0.4}
