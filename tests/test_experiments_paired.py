"""Paired differences per seed against a named baseline (``compare`` in an experiment file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.cell_results import CellResult
from experiments.paired import StartMismatch, paired_curves, paired_rows, paired_section, start_mismatches
from experiments.report import write_tables
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


def rounds_result(accuracies: list[float | None]) -> CellResult:
    rounds = [{"round": r, "accuracy": a} for r, a in enumerate(accuracies, start=1)]
    return CellResult({}, rounds, {})


def test_round_by_round_differences_over_the_rounds_every_paired_seed_scored():
    """Seed 0: 3 rounds each; seed 1: the method's round 2 unscored (evaluate-every), the baseline stopped after 2;
    seed 2: no baseline. With seeds 0 and 1 only round 1 is scored in every pair; with seed 0 alone, all three."""
    exp = experiment(compare={"fedft-eds": "fedavg"})
    by_name = {c.name: c for c in exp.cells}
    results = {
        by_name["fedft-eds__seed0"]: rounds_result([0.50, 0.60, 0.70]),
        by_name["fedavg__seed0"]: rounds_result([0.40, 0.65, 0.60]),
        by_name["fedft-eds__seed1"]: rounds_result([0.30, None, 0.50]),
        by_name["fedavg__seed1"]: rounds_result([0.35, 0.45]),
        by_name["fedft-eds__seed2"]: rounds_result([0.9, 0.9, 0.9]),
    }
    (curve,) = paired_curves(exp, results)
    assert curve.seeds == (0, 1) and curve.rounds == (1,)
    assert [list(d) for d in curve.differences] == [pytest.approx([0.10]), pytest.approx([-0.05])]
    means, stds = curve.mean_std()
    assert means == pytest.approx([0.025]) and stds[0] == pytest.approx(0.10606601717798213)
    del results[by_name["fedft-eds__seed1"]]
    (curve,) = paired_curves(exp, results)
    assert curve.rounds == (1, 2, 3) and [list(d) for d in curve.differences] == [pytest.approx([0.10, -0.05, 0.10])]
    assert curve.mean_std()[1] == [None, None, None]


def started(best: float, config: dict, **start: object) -> CellResult:
    """A finished run with its start's record (``start_fingerprint`` and/or ``initial_accuracy``)."""
    return CellResult({**result(best, best).summary, **start}, [{"round": 1, "accuracy": best}], config)


PRETRAINED = {"pretrain": "dataset", "pretrain-round": True, "pretrain-cache-dir": ""}


def test_a_seed_whose_runs_started_from_different_models_is_left_out_and_named():
    """Seed 1's runs agree on every start setting (the cache folder aside) yet started apart: a remade start."""
    exp = experiment(compare={"fedft-eds": "fedavg"})
    by_name = {c.name: c for c in exp.cells}
    elsewhere = {**PRETRAINED, "pretrain-cache-dir": "/elsewhere"}
    results = {
        by_name["fedft-eds__seed0"]: started(0.70, PRETRAINED, start_fingerprint="a"),
        by_name["fedavg__seed0"]: started(0.60, elsewhere, start_fingerprint="a"),
        by_name["fedft-eds__seed1"]: started(0.80, PRETRAINED, start_fingerprint="b"),
        by_name["fedavg__seed1"]: started(0.60, PRETRAINED, start_fingerprint="c"),
    }
    (row,) = paired_rows(exp, results)
    assert row.seeds == (0,) and row.differences["best_accuracy"] == pytest.approx((0.10,))
    (curve,) = paired_curves(exp, results)
    assert curve.seeds == (0,)
    assert start_mismatches(exp, results) == [StartMismatch((), "fedft-eds", "fedavg", 1)]
    assert "started from different models although their start settings agree" in "\n".join(
        paired_section(exp, results)
    )
    assert "fedft-eds − fedavg, seed 1." in "\n".join(paired_section(exp, results))


def test_runs_recorded_before_the_fingerprint_are_judged_by_the_start_accuracy():
    exp = experiment(compare={"fedft-eds": "fedavg"})
    by_name = {c.name: c for c in exp.cells}
    results = {
        by_name["fedft-eds__seed0"]: started(0.70, PRETRAINED, initial_accuracy=0.3423),
        by_name["fedavg__seed0"]: started(0.60, PRETRAINED, initial_accuracy=0.3956),
        by_name["fedft-eds__seed1"]: started(0.70, PRETRAINED, initial_accuracy=0.3423, start_fingerprint="a"),
        by_name["fedavg__seed1"]: started(0.60, PRETRAINED, initial_accuracy=0.34230001),  # float32 rounding
    }
    (row,) = paired_rows(exp, results)
    assert row.seeds == (1,)
    assert [m.seed for m in start_mismatches(exp, results)] == [0]


def test_a_pair_that_compares_starts_on_purpose_is_kept():
    """FedAvg with and without pretraining: their start settings differ, so their starts may."""
    exp = experiment(compare={"fedft-eds": "fedavg"})
    by_name = {c.name: c for c in exp.cells}
    results = {
        by_name["fedft-eds__seed0"]: started(0.70, PRETRAINED, start_fingerprint="a"),
        by_name["fedavg__seed0"]: started(0.60, {**PRETRAINED, "pretrain": "none"}, start_fingerprint="b"),
    }
    (row,) = paired_rows(exp, results)
    assert row.seeds == (0,) and start_mismatches(exp, results) == []


def test_settings_that_shape_the_pretraining_round_count_as_start_settings():
    """With a pretraining round, a pair that trains its clients at another learning rate starts apart on purpose;
    without one, the learning rate does not touch the start. A key one run predates is not held against it."""
    exp = experiment(compare={"fedft-eds": "fedavg"})
    by_name = {c.name: c for c in exp.cells}
    faster = {**PRETRAINED, "learning-rate": 0.1}
    results = {
        by_name["fedft-eds__seed0"]: started(0.70, {**PRETRAINED, "learning-rate": 0.01}, start_fingerprint="a"),
        by_name["fedavg__seed0"]: started(0.60, faster, start_fingerprint="b"),
        by_name["fedft-eds__seed1"]: started(
            0.70, {**PRETRAINED, "pretrain-round": False, "learning-rate": 0.01}, start_fingerprint="a"
        ),
        by_name["fedavg__seed1"]: started(0.60, {**faster, "pretrain-round": False}, start_fingerprint="b"),
        by_name["fedft-eds__seed2"]: started(0.70, {**PRETRAINED, "dropout": 0.0}, start_fingerprint="a"),
        by_name["fedavg__seed2"]: started(0.60, PRETRAINED, start_fingerprint="b"),
    }
    assert [m.seed for m in start_mismatches(exp, results)] == [1, 2]


def test_the_report_records_a_seed_left_out_for_the_docs(tmp_path: Path):
    """From the cells to summary.json's ``started_apart``, which the docs' tables read (tests/test_doc_tables.py)."""
    exp = experiment(compare={"fedft-eds": "fedavg"})
    by_name = {c.name: c for c in exp.cells}
    full = {"rounds": 1, "initial_accuracy": 0.3, "total_client_train_seconds": 1.0, "learning_efficiency": 1.0}
    results = {
        by_name["fedft-eds__seed0"]: started(0.70, PRETRAINED, **full, start_fingerprint="a"),
        by_name["fedavg__seed0"]: started(0.60, PRETRAINED, **full, start_fingerprint="b"),
        by_name["fedft-eds__seed1"]: started(0.70, PRETRAINED, **full, start_fingerprint="a"),
        by_name["fedavg__seed1"]: started(0.60, PRETRAINED, **full, start_fingerprint="a"),
    }
    write_tables(exp, results, tmp_path)
    record = json.loads((tmp_path / "summary.json").read_text())
    assert record["started_apart"] == [{"method": "fedft-eds", "baseline": "fedavg", "point": {}, "seed": 0}]
