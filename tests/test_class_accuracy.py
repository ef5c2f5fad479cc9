"""``report --classes`` (experiments/class_accuracy.py): each cell's accuracy on some classes and on the rest, and the
final accuracy on those classes paired per seed (the thesis's Table 5.8 asks after the classes absent from D_g)."""

from __future__ import annotations

from pathlib import Path

from experiments.cell_results import CellResult
from experiments.class_accuracy import classes_view
from experiments.spec import Experiment, parse_experiment


def _experiment(tmp_path: Path, seeds: list[int], alphas: list[float]) -> Experiment:
    raw = {
        "description": "d",
        "cost": "c",
        "methods": {"fedat": {"method": "fedavg"}, "fedavg-0": {"method": "fedavg"}},
        "grid": {"dirichlet-alpha": alphas},
        "seeds": seeds,
    }
    return parse_experiment(raw, tmp_path / "e.yaml")


def _final(absent: float) -> CellResult:
    per_class = [absent if c in (0, 5, 8) else 0.9 for c in range(10)]
    return CellResult({}, [{"round": 1, "accuracy": 0.5, "class_accuracy": per_class}], {})


def test_rows_give_the_classes_and_the_mean_of_the_others_for_initial_best_and_final(tmp_path: Path) -> None:
    experiment = _experiment(tmp_path, [0], [0.1])
    per_class = [[0.1 * c for c in range(10)], [0.5] * 10, [1.0, 0, 0, 0, 0, 0.25, 0, 0, 0.75, 0]]
    summary = {"initial_accuracy": 0.45, "initial_class_accuracy": per_class[0]}
    rounds = [{"round": 1, "accuracy": 0.5, "class_accuracy": per_class[1]}]
    rounds += [{"round": 2, "accuracy": 0.2, "class_accuracy": per_class[2]}]
    cell = experiment.cells[0]
    lines = classes_view(experiment, {cell: CellResult(summary, rounds, {})}, (0, 5, 8), {}).splitlines()
    others = 100 * sum(0.1 * c for c in (1, 2, 3, 4, 6, 7, 9)) / 7
    assert lines[0] == "| cell | model | all | class 0 | class 5 | class 8 | mean of classes 1,2,3,4,6,7,9 |"
    assert lines[2:] == [
        f"| {cell.name} | initial | 45.0 | 0.0 | 50.0 | 80.0 | {others:.1f} |",
        f"| {cell.name} | round 1 (best) | 50.0 | 50.0 | 50.0 | 50.0 | 50.0 |",
        f"| {cell.name} | round 2 (final) | 20.0 | 100.0 | 25.0 | 75.0 | 0.0 |",
    ]


def test_pairs_difference_the_final_means_seed_by_seed_within_each_grid_point(tmp_path: Path) -> None:
    experiment = _experiment(tmp_path, [0, 1], [0.1, 0.5])
    values = {(0.1, 0): (0.6, 0.2), (0.1, 1): (0.4, 0.2), (0.5, 0): (0.1, 0.9)}  # α = 0.5, seed 1: not finished
    results = {}
    for cell in experiment.cells:
        key = (dict(cell.point)["dirichlet-alpha"], cell.seed)
        if key in values:
            results[cell] = _final(values[key][0 if cell.method == "fedat" else 1])
    lines = classes_view(experiment, results, (0, 5, 8), {"fedat": "fedavg-0"}).splitlines()
    assert lines[-5:] == [
        "|---|---|---|---|---|",
        "| fedat − fedavg-0 | dirichlet-alpha=0.1, seed 0 | 60.0 | 20.0 | +40.0 |",
        "| fedat − fedavg-0 | dirichlet-alpha=0.1, seed 1 | 40.0 | 20.0 | +20.0 |",
        "| fedat − fedavg-0 | dirichlet-alpha=0.1, mean | | | +30.0 ± 14.1 (2/2 ahead) |",
        "| fedat − fedavg-0 | dirichlet-alpha=0.5, seed 0 | 10.0 | 90.0 | -80.0 |",
    ]
