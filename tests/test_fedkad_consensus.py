"""benchmarks/fedkad_consensus.py on a made-up experiment folder: the gain, the consensus accuracies, the ranks."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.fedkad_consensus import pearson, ranks, spearman, study


def write_cell(folder: Path, accuracy: list[float], consensus: list[float]) -> None:
    folder.mkdir(parents=True)
    rows = [{"accuracy": a, "consensus_accuracy": c} for a, c in zip(accuracy, consensus, strict=True)]
    (folder / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "summary.json").write_text("{}")


def test_ranks_and_correlations() -> None:
    assert ranks([3.0, 1.0, 2.0, 2.0]) == [4.0, 1.0, 2.5, 2.5]
    assert pearson([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == 1.0
    assert spearman([1.0, 2.0, 3.0], [9.0, 4.0, 1.0]) == -1.0


def test_study_pairs_each_seed_and_alpha(tmp_path: Path) -> None:
    cells = tmp_path / "cells"
    write_cell(cells / "fedkad__dirichlet-alpha=0.1__seed0", [0.5, 0.7], [0.6, 0.8])
    write_cell(cells / "fedmd-thesis__dirichlet-alpha=0.1__seed0", [0.4, 0.5], [0.5, 0.6])
    write_cell(cells / "fedkad__dirichlet-alpha=0.5__seed0", [0.7, 0.75], [0.8, 0.8])
    write_cell(cells / "fedmd-thesis__dirichlet-alpha=0.5__seed0", [0.7, 0.76], [0.8, 0.8])
    write_cell(cells / "fedkad__dirichlet-alpha=1.0__seed0", [0.7], [0.8])  # no baseline: left out
    rows = study(tmp_path)["rows"]
    assert [(r["alpha"], r["seed"]) for r in rows] == [(0.1, 0), (0.5, 0)]
    assert rows[0]["gain_best"] == 20.0 and rows[0]["baseline_consensus_mean"] == 55.0
    assert rows[0]["consensus_gain_mean"] == 15.0 and rows[0]["baseline_consensus_final"] == 60.0
    assert rows[1]["gain_best"] == -1.0
