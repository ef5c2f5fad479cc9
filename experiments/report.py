"""Tables and figures of an experiment from the cells that have finished (any subset of them)."""

from __future__ import annotations

from pathlib import Path

from data.catalog import DATASETS
from experiments.active_learning import read_cycles, write_active_learning_report
from experiments.cell_results import CellResult, is_finished, read_cell
from experiments.class_accuracy import write_class_accuracy_report
from experiments.entropy_histogram import client_entropies
from experiments.paired import paired_curves, paired_section
from experiments.plots import (
    mean_curves,
    planned,
    plot_accuracy,
    plot_cohort_entropy,
    plot_entropy_histograms,
    plot_learning_efficiency,
    plot_paired_rounds,
)
from experiments.runner import CELLS_DIR
from experiments.spec import Cell, Experiment
from experiments.summary import computed_on, summarise, write_summary, write_summary_json
from methods.registry import parse_config


def finished_results(experiment: Experiment, results_dir: Path) -> dict[Cell, CellResult]:
    """The results of every finished cell."""
    return {
        cell: read_cell(results_dir / CELLS_DIR / cell.name)
        for cell in experiment.cells
        if is_finished(results_dir / CELLS_DIR / cell.name)
    }


def write_report(experiment: Experiment, results_dir: Path) -> list[Path]:
    """summary.md/.csv/.json, the PNG figures (with ``compare``, each pair's per-round paired difference too) and (when
    the cells recorded it) class_accuracy.md in ``results_dir``; returns the files written."""
    results = finished_results(experiment, results_dir)
    missing = [c for c in experiment.cells if c not in results]
    rows = summarise(experiment, results)
    summary = write_summary(
        experiment, rows, results_dir, missing, computed_on(results), paired_section(experiment, results)
    )
    cycles = {cell: read_cycles(results_dir / CELLS_DIR / cell.name) for cell in results}
    written = [summary, results_dir / "summary.csv", write_summary_json(experiment, results, results_dir, cycles)]
    if not results:
        return written
    curves, plan = mean_curves(experiment, results), planned(experiment)
    num_classes = DATASETS[next(iter(results.values())).config["dataset"]].num_classes
    written += [
        plot_accuracy(curves, plan, results_dir / "accuracy_vs_round.png"),
        plot_accuracy(curves, plan, results_dir / "accuracy_vs_client_seconds.png", against_seconds=True),
        plot_learning_efficiency(rows, plan, results_dir / "learning_efficiency.png"),
        plot_cohort_entropy(curves, plan, num_classes, results_dir / "cohort_label_entropy.png"),
    ]
    if experiment.compare and (pairs := paired_curves(experiment, results)):
        written.append(plot_paired_rounds(pairs, plan, results_dir / "paired_difference_vs_round.png"))
    written += write_active_learning_report(experiment, results, results_dir / CELLS_DIR, results_dir)
    written += write_class_accuracy_report(experiment, results, results_dir)
    histogram = experiment.histogram
    source = next((c for c in results if histogram and c.method == histogram.method), None)
    if histogram and source:
        config = parse_config(results[source].config)
        entropies = client_entropies(config, histogram.partition, experiment.clients, histogram.temperatures)
        title = (
            f"client {histogram.partition} of {experiment.clients}, {config.dataset}, initial model of {source.name}"
        )
        written.append(plot_entropy_histograms(entropies, title, results_dir / "entropy_histograms.png"))
    return written
