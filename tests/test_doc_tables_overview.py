"""The overview's sentence on the paper's Table II from the two-step start: each recorded file's paired differences,
its seed count and the paper's figures, read from the files."""

from __future__ import annotations

import pytest

from experiments.doc_tables import overview
from experiments.doc_tables.recorded import RecordedCell, RecordedExperiment


def _run(folder: str, best: dict[str, float], seeds: tuple[int, ...]) -> RecordedExperiment:
    """Each method's best accuracy as given at Dir(0.1), 0.02 above it at Dir(0.5) for FedAvg alone, 0.01 up a seed."""
    cells = tuple(
        RecordedCell(
            f"{method}__{alpha}__seed{seed}",
            method,
            {"dirichlet-alpha": alpha},
            seed,
            "box",
            {"best_accuracy": value + 0.01 * seed + (0.02 if (method, alpha) == ("fedavg", 0.5) else 0)},
            {},
            (),
        )
        for method, value in best.items()
        for alpha in (0.1, 0.5)
        for seed in seeds
    )
    return RecordedExperiment(folder, 10, seeds, {}, tuple(best), {}, (), cells)


def test_the_two_step_table_ii_sentence_pairs_each_file_by_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = {
        overview.TABLE2_FULL: _run("full", {"fedft-eds": 0.60, "fedft-rds": 0.58, "fedavg": 0.65}, (0, 1, 2)),
        overview.TABLE2_MINI: _run("mini", {"fedft-eds": 0.50, "fedft-rds": 0.53, "fedavg": 0.59}, (0, 1)),
    }
    monkeypatch.setattr(overview, "load", runs.__getitem__)
    sentence = overview._table2_two_step_sentence()
    full, mini = sentence.split("; ")
    assert full.endswith(
        "lenet-5-full-set): FedFT-EDS > FedFT-RDS (10%): +2.0 ± 0.0 (3/3) / +2.0 ± 0.0 (3/3), FedFT-EDS (10%) > "
        "FedAvg: −5.0 ± 0.0 (0/3) / −7.0 ± 0.0 (0/3)"
    )
    assert mini.startswith(
        "[WRN-16-1, mini set](#fedft-eds-paper-table-ii-from-the-pretraining-phases-two-steps-wrn-16-1-mini-set): "
        "FedFT-EDS > FedFT-RDS (10%): −3.0 ± 0.0 (0/2) / −3.0 ± 0.0 (0/2), FedFT-EDS (10%) > FedAvg: −9.0 ± 0.0 "
        "(0/2) / −11.0 ± 0.0 (0/2)"
    )
    assert sentence.endswith(
        "(the paper, CIFAR-10: FedFT-EDS > FedFT-RDS (10%): +2.71 / +0.73, FedFT-EDS (10%) > FedAvg: +8.64 / +4.51)."
    )
