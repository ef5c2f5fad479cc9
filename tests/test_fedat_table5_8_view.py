"""experiments/fedat_table5_8_view.py: Table 5.8's rows from a cell's files."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.fedat_table5_8_view import paired_rows, rows


def test_rows_give_the_absent_classes_and_the_generic_mean_of_initial_best_and_final(tmp_path: Path) -> None:
    per_class = [[0.1 * c for c in range(10)], [0.5] * 10, [1.0, 0, 0, 0, 0, 0.25, 0, 0, 0.75, 0]]
    (tmp_path / "summary.json").write_text(
        json.dumps({"initial_accuracy": 0.45, "initial_class_accuracy": per_class[0]})
    )
    records = [{"round": 1, "accuracy": 0.5, "class_accuracy": per_class[1]}]
    records += [{"round": 2, "accuracy": 0.2, "class_accuracy": per_class[2]}]
    (tmp_path / "rounds.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    (tmp_path / "config.json").write_text("{}")
    generic_initial = 100 * sum(0.1 * c for c in (1, 2, 3, 4, 6, 7, 9)) / 7
    assert rows(tmp_path) == [
        f"| {tmp_path.name} | initial | 45.0 | 0.0 | 50.0 | 80.0 | {generic_initial:.1f} |",
        f"| {tmp_path.name} | round 1 (best) | 50.0 | 50.0 | 50.0 | 50.0 | 50.0 |",
        f"| {tmp_path.name} | round 2 (final) | 20.0 | 100.0 | 25.0 | 75.0 | 0.0 |",
    ]


def _cell(folder: Path, name: str, absent: float) -> None:
    cell = folder / "cells" / name
    cell.mkdir(parents=True)
    per_class = [absent if c in (0, 5, 8) else 0.9 for c in range(10)]
    (cell / "summary.json").write_text("{}")
    (cell / "config.json").write_text("{}")
    (cell / "rounds.jsonl").write_text(json.dumps({"round": 1, "accuracy": 0.5, "class_accuracy": per_class}))


def test_paired_rows_difference_the_final_absent_class_means_seed_by_seed(tmp_path: Path) -> None:
    for seed, (ours, theirs) in enumerate([(0.6, 0.2), (0.3, 0.4)]):
        _cell(tmp_path, f"fedat__seed{seed}", ours)
        _cell(tmp_path, f"fedavg-60__seed{seed}", theirs)
    _cell(tmp_path, "fedat__seed9", 0.5)  # no baseline cell on this seed: left out
    assert paired_rows(tmp_path, "fedat", "fedavg-60") == [
        "| fedat − fedavg-60 | seed0 | 60.0 | 20.0 | +40.0 |",
        "| fedat − fedavg-60 | seed1 | 30.0 | 40.0 | -10.0 |",
        "| fedat − fedavg-60 | mean | | | +15.0 ± 35.4 (1/2 ahead) |",
    ]


def test_paired_rows_average_seeds_within_a_setting_never_across_settings(tmp_path: Path) -> None:
    for alpha, seed, ours, theirs in [(0.1, 0, 0.6, 0.2), (0.1, 1, 0.4, 0.2), (0.5, 0, 0.1, 0.9)]:
        _cell(tmp_path, f"fedat__dirichlet-alpha={alpha}__seed{seed}", ours)
        _cell(tmp_path, f"fedavg-0__dirichlet-alpha={alpha}__seed{seed}", theirs)
    assert paired_rows(tmp_path, "fedat", "fedavg-0") == [
        "| fedat − fedavg-0 | dirichlet-alpha=0.1, seed0 | 60.0 | 20.0 | +40.0 |",
        "| fedat − fedavg-0 | dirichlet-alpha=0.1, seed1 | 40.0 | 20.0 | +20.0 |",
        "| fedat − fedavg-0 | dirichlet-alpha=0.5, seed0 | 10.0 | 90.0 | -80.0 |",
        "| fedat − fedavg-0 | dirichlet-alpha=0.1, mean | | | +30.0 ± 14.1 (2/2 ahead) |",
    ]
