"""Paired differences per seed against a named baseline (``compare`` in an experiment file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cell_results import CellResult
from experiments.paired import paired_rows, paired_section
from experiments.spec import ExperimentFileError, parse_experiment


def experiment(**extra):
    raw = {"description": "d", "cost": "c", "methods": ["fedft-eds", "fedavg"], "seeds": [0, 1, 2], **extra}
    return parse_experiment(raw, Path("exp.yaml"))


def result(best: float, final: float) -> CellResult:
    return CellResult({"best_accuracy": best, "final_accuracy": final, "mean_last10_accuracy": final}, [], {})


def test_differences_are_taken_seed_by_seed_over_the_seeds_both_finished():
    exp = experiment(compare={"fedft-eds": "fedavg"})
    by_name = {c.name: c for c in exp.cells}
    results = {
        by_name["fedft-eds__seed0"]: result(0.70, 0.65),
        by_name["fedft-eds__seed1"]: result(0.60, 0.60),
        by_name["fedft-eds__seed2"]: result(0.50, 0.50),
        by_name["fedavg__seed0"]: result(0.60, 0.60),
        by_name["fedavg__seed1"]: result(0.65, 0.55),
    }
    (row,) = paired_rows(exp, results)
    assert row.seeds == (0, 1) and (row.method, row.baseline) == ("fedft-eds", "fedavg")
    assert row.differences["best_accuracy"] == pytest.approx((0.10, -0.05))
    assert row.differences["final_accuracy"] == pytest.approx((0.05, 0.05))
    text = "\n".join(paired_section(exp, results))
    assert "| fedft-eds − fedavg | 0 1 | +10.0, -5.0 | +2.5 ± 10.6 (1/2 seeds ahead) | +5.0, +5.0 |" in text


def test_no_comparison_writes_no_section():
    assert paired_section(experiment(), {}) == []


def test_a_pair_must_name_methods_of_the_file():
    with pytest.raises(ExperimentFileError, match="'compare.fedft-eds \\(its baseline\\)' = 'fedprox' is not a method"):
        experiment(compare={"fedft-eds": "fedprox"})
    with pytest.raises(ExperimentFileError, match="names the method as its own baseline"):
        experiment(compare={"fedavg": "fedavg"})


def test_a_model_both_methods_add_is_compared_too():
    exp = parse_experiment(
        {
            "description": "d",
            "cost": "c",
            "methods": ["fedsplit-kmeans", "fedsplit-all"],
            "seeds": [0],
            "compare": {"fedsplit-kmeans": "fedsplit-all"},
        },
        Path("exp.yaml"),
    )
    kmeans, everything = exp.cells
    with_composed = {
        kmeans: CellResult({**result(0.7, 0.7).summary, "best_composed_accuracy": 0.55}, [], {}),
        everything: CellResult({**result(0.7, 0.7).summary, "best_composed_accuracy": 0.65}, [], {}),
    }
    (row,) = paired_rows(exp, with_composed)
    assert row.differences["best_composed_accuracy"] == pytest.approx((-0.10,))
    assert "best composed acc. per seed (pts)" in "\n".join(paired_section(exp, with_composed))
