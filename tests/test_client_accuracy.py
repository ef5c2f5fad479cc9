"""The client models' view of a FedMD/FedKAD experiment (clients.md): best and final values per cell, paired per
seed."""

from __future__ import annotations

from pathlib import Path

from experiments.cell_results import CellResult
from experiments.client_accuracy import best_and_final, clients_report, write_clients_report
from experiments.report import finished_results
from experiments.spec import load_experiment

EXPERIMENT = """
name: view
description: d
cost: 1 min
clients: 2
base: {dataset: synthetic, num-server-rounds: 2}
methods:
  fedmd: {method: fedmd}
  alone: {method: fedmd, fedkad.fedmd-digest: none}
compare: {fedmd: alone}
seeds: [0, 1]
"""


def _cell(clients: list[float], accuracy: list[float]) -> CellResult:
    rounds = [
        {"round": i + 1, "accuracy": a, "client_accuracy_mean": c} for i, (c, a) in enumerate(zip(clients, accuracy))
    ]
    return CellResult({"status": "completed"}, rounds, {})


def test_best_and_final_skip_rounds_without_the_field() -> None:
    rounds = [{"x": 0.2}, {"x": None}, {"x": 0.5}, {"x": 0.4}, {}]
    assert best_and_final(rounds, "x") == (0.5, 0.4)
    assert best_and_final([{}], "x") is None


def test_clients_are_paired_per_seed(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text(EXPERIMENT)
    experiment = load_experiment(tmp_path / "e.yaml")
    cells = {
        "fedmd__seed0": _cell([0.5, 0.6], [0.3, 0.3]),
        "alone__seed0": _cell([0.55, 0.4], [0.3, 0.2]),
        "fedmd__seed1": _cell([0.7, 0.7], [0.1, 0.1]),  # seed 1 of the baseline did not finish: not paired
    }
    results = finished_results(experiment, cells)
    report = clients_report(experiment, results)
    assert "| fedmd − alone | 0 | +5.0 | +5.0 (1/1 seeds ahead) | +20.0 | +20.0 (1/1 seeds ahead) |" in report
    assert "| fedmd − alone | 0 | +0.0 | +0.0 (0/1 seeds ahead) | +10.0 | +10.0 (1/1 seeds ahead) |" in report
    assert "|  | fedmd | 1 | 70.0 / 70.0 | – | 10.0 / 10.0 |" in report
    assert write_clients_report(experiment, results, tmp_path) == [tmp_path / "clients.md"]
    assert (tmp_path / "clients.md").read_text() == report
    global_only = {cell: CellResult({}, [{"round": 1, "accuracy": 0.5}], {}) for cell in results}
    assert write_clients_report(experiment, global_only, tmp_path / "none") == []  # no cell records the clients' mean
