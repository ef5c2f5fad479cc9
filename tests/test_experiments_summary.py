"""Summary tables and figure data: mean ± sample std over seeds, CSV columns, per-round mean curves."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from experiments.cell_results import CellResult
from experiments.class_accuracy import class_accuracy_table, write_class_accuracy_report
from experiments.plots import mean_curves, planned, plot_accuracy, plot_cohort_entropy, plot_learning_efficiency
from experiments.progress import format_duration, progress_line, seconds_left
from experiments.spec import parse_experiment
from experiments.summary import computed_on, markdown_table, mean_std, summarise, write_csv


def experiment():
    raw = {
        "description": "d",
        "cost": "c",
        "methods": ["fedavg", "fedft-eds"],
        "grid": {"dirichlet-alpha": [0.1]},
        "seeds": [0, 1],
    }
    return parse_experiment(raw, Path("exp.yaml"))


def result(best: float, seconds: list[float], accuracy: list[float], entropy: list[float]) -> CellResult:
    rounds = [
        {"round": i + 1, "accuracy": a, "client_train_seconds": s, "cohort_label_entropy": e}
        for i, (a, s, e) in enumerate(zip(accuracy, seconds, entropy))
    ]
    summary = {
        "best_accuracy": best,
        "mean_last10_accuracy": sum(accuracy) / len(accuracy),
        "learning_efficiency": 100 * best / sum(seconds),
        "total_client_train_seconds": sum(seconds),
        "total_bytes_down": 2e6,
        "total_bytes_up": 1e6,
    }
    return CellResult(summary, rounds, {"dataset": "fashion-mnist-mini"})


def results():
    fedavg0, fedavg1, eds0 = experiment().cells[:3]
    return {
        fedavg0: result(0.6, [10.0, 10.0], [0.5, 0.6], [3.0, 3.2]),
        fedavg1: result(0.7, [12.0, 14.0], [0.7, 0.6], [3.1, 3.3]),
        eds0: result(0.8, [1.0, 1.0], [0.8, 0.7], [2.0, 2.0]),  # seed 1 of fedft-eds has not finished
    }


def test_the_machines_that_computed_the_cells_are_named_with_their_counts() -> None:
    cells = results()
    epyc = {"device": "cpu", "cpu": "AMD EPYC (family 26, model 2)", "torch": "2.13.0+cpu", "threads": 2}
    first, second, third = cells.values()
    first.summary["machine"] = second.summary["machine"] = {**epyc, "cpu_capability": "AVX512"}
    third.summary["machine"] = {**epyc, "device": "cuda:0", "gpu": "NVIDIA H100", "cpu_capability": "AVX2"}
    assert computed_on(cells) == (
        "AMD EPYC (family 26, model 2), torch 2.13.0+cpu, CPU kernels AVX512, 2 threads (2 cells); "
        "NVIDIA H100 with AMD EPYC (family 26, model 2), torch 2.13.0+cpu, CPU kernels AVX2, 2 threads (1 cell)"
    )
    del third.summary["machine"]
    assert computed_on(cells).endswith("; not recorded (cells from before 24 November 2026) (1 cell)")


def test_mean_std_is_sample_std_and_none_for_one_value() -> None:
    assert mean_std([1.0, 2.0, 4.0]) == pytest.approx((7 / 3, math.sqrt(7 / 3)))
    assert mean_std([5.0]) == (5.0, None)
    assert math.isnan(mean_std([])[0])


def test_summary_rows_average_over_the_seeds_that_finished() -> None:
    rows = summarise(experiment(), results())
    assert [(r.method, r.seeds) for r in rows] == [("fedavg", (0, 1)), ("fedft-eds", (0,))]
    best_mean, best_std = rows[0].stats["best_accuracy"]
    assert best_mean == pytest.approx(0.65) and best_std == pytest.approx(math.sqrt(0.005))
    assert rows[1].stats["total_client_train_seconds"] == (2.0, None)
    table = markdown_table(experiment(), rows).splitlines()
    assert table[0].startswith("| dirichlet-alpha | method | seeds | best acc. (%) | last-10 mean acc. (%) |")
    assert (
        table[2]
        == "| 0.1 | fedavg | 2 | 65.00 ± 7.07 | 60.00 ± 7.07 | 2.846 ± 0.218 | 23.0 ± 4.2 | 2.0 ± 0.0 | 1.0 ± 0.0 |"
    )
    assert table[3] == "| 0.1 | fedft-eds | 1 | 80.00 | 75.00 | 40.000 | 2.0 | 2.0 | 1.0 |"


def test_csv_has_mean_and_std_columns_in_summary_units(tmp_path: Path) -> None:
    write_csv(experiment(), summarise(experiment(), results()), tmp_path / "s.csv")
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert rows[0]["dirichlet-alpha"] == "0.1" and rows[0]["method"] == "fedavg" and rows[0]["seeds"] == "0 1"
    assert float(rows[0]["best_accuracy_mean"]) == pytest.approx(0.65)
    assert rows[1]["best_accuracy_std"] == "" and float(rows[1]["total_bytes_up_mean"]) == 1e6


def test_mean_curves_average_rounds_and_accumulate_client_seconds(tmp_path: Path) -> None:
    curves = mean_curves(experiment(), results())
    fedavg = curves["dirichlet-alpha=0.1"]["fedavg"]
    np.testing.assert_allclose(fedavg.accuracy, [0.6, 0.6])
    np.testing.assert_allclose(fedavg.client_seconds, [11.0, 23.0])
    np.testing.assert_allclose(fedavg.cohort_entropy, [3.05, 3.25])
    np.testing.assert_allclose(fedavg.accuracy_std, [np.std([0.5, 0.7], ddof=1), 0.0])
    plan = planned(experiment())
    for path in (
        plot_accuracy(curves, plan, tmp_path / "a.png"),
        plot_cohort_entropy(curves, plan, 10, tmp_path / "e.png"),
        plot_learning_efficiency(summarise(experiment(), results()), plan, tmp_path / "le.png"),
    ):
        assert path.read_bytes()[:4] == b"\x89PNG"


def test_progress_line_and_time_left() -> None:
    assert seconds_left(elapsed=60.0, rounds_done=3, rounds_total=12) == 180.0
    assert seconds_left(elapsed=5.0, rounds_done=0, rounds_total=12) is None
    assert (
        format_duration(75) == "1m15s" and format_duration(3 * 3600 + 120) == "3h02m" and format_duration(None) == "?"
    )
    line = progress_line(
        cells_done=2,
        cells_total=6,
        cell="fedft-eds__seed0",
        server_round=3,
        num_rounds=10,
        accuracy=0.612,
        elapsed=250.0,
        left=545.0,
    )
    assert line == "[2/6 cells] fedft-eds__seed0: round 3/10, accuracy 61.20% | 4m10s elapsed, ≈ 9m05s left"


def test_the_base_accuracy_column_appears_only_when_a_cell_records_it() -> None:
    plain = results()
    assert "best base acc." not in markdown_table(experiment(), summarise(experiment(), plain))
    with_base = dict(plain)
    cell = experiment().cells[0]
    with_base[cell] = CellResult({**plain[cell].summary, "best_base_accuracy": 0.55}, plain[cell].rounds, {})
    table = markdown_table(experiment(), summarise(experiment(), with_base))
    header, _, first, second = table.splitlines()[:4]
    assert header.split(" | ")[3:5] == ["best acc. (%)", "best base acc. (%)"]
    assert "| 55.00 |" in first + second and "| – |" in table  # fedft-eds has none


def test_a_method_s_own_metrics_get_columns_only_when_some_row_has_them(tmp_path: Path) -> None:
    plain = markdown_table(experiment(), summarise(experiment(), results())).splitlines()[0]
    assert "composed" not in plain and "metadata" not in plain
    with_split = results()
    cell = next(iter(with_split))
    with_split[cell].summary.update(best_composed_accuracy=0.55, total_metadata_bytes=3e6)
    rows = summarise(experiment(), with_split)
    table = [
        [c.strip() for c in line.strip("|").split("|")] for line in markdown_table(experiment(), rows).splitlines()
    ]
    composed, metadata = table[0].index("best composed acc. (%)"), table[0].index("MB metadata")
    assert metadata == composed + 1 == table[0].index("best acc. (%)") + 2  # after the best accuracy
    assert (table[2][composed], table[2][metadata]) == ("55.00", "3.0")
    assert (table[3][composed], table[3][metadata]) == ("–", "–")
    write_csv(experiment(), rows, tmp_path / "s.csv")
    assert float(next(csv.DictReader((tmp_path / "s.csv").open()))["best_composed_accuracy_mean"]) == 0.55


def test_class_accuracy_table_shows_initial_best_and_final_rounds_of_cells_that_recorded_them(tmp_path: Path) -> None:
    fedavg0, fedavg1, eds0 = experiment().cells[:3]
    rounds = [
        {"round": 1, "accuracy": 0.6, "class_accuracy": [0.5, None, 0.7]},
        {"round": 2, "accuracy": 0.5, "class_accuracy": [0.25, None, 0.75]},
    ]
    summary = {"initial_accuracy": 0.4, "initial_class_accuracy": [0.125, None, 0.6]}
    cells = {
        fedavg0: CellResult(summary, rounds, {}),
        fedavg1: CellResult({}, rounds[:1], {}),  # best and final are one round; no initial per class
        eds0: result(0.8, [1.0], [0.8], [2.0]),  # recorded before rounds kept each class's accuracy: left out
    }
    table = class_accuracy_table(experiment(), cells)
    assert table is not None
    lines = table.splitlines()
    assert lines[0] == "| cell | model | all | class 0 | class 1 | class 2 |"
    assert lines[2:] == [
        f"| {fedavg0.name} | initial | 40.0 | 12.5 | – | 60.0 |",
        f"| {fedavg0.name} | round 1 (best) | 60.0 | 50.0 | – | 70.0 |",
        f"| {fedavg0.name} | round 2 (final) | 50.0 | 25.0 | – | 75.0 |",
        f"| {fedavg1.name} | round 1 (best, final) | 60.0 | 50.0 | – | 70.0 |",
    ]
    assert write_class_accuracy_report(experiment(), cells, tmp_path) == [tmp_path / "class_accuracy.md"]
    assert table in (tmp_path / "class_accuracy.md").read_text()
    assert write_class_accuracy_report(experiment(), {eds0: cells[eds0]}, tmp_path / "none") == []
