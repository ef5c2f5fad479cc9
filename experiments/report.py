"""Tables and figures of an experiment from the cells that have finished (any subset of them), and the check that a
results folder's tables are what its recorded cells give, byte for byte."""

from __future__ import annotations

import difflib
import tempfile
from collections.abc import Mapping
from pathlib import Path

from data.catalog import DATASETS
from experiments.active_learning import write_active_learning_figure, write_active_learning_tables
from experiments.cell_results import CellResult
from experiments.class_accuracy import write_class_accuracy_report
from experiments.client_accuracy import write_clients_report
from experiments.entropy_histogram import client_entropies
from experiments.fedfsc_lag import write_decomposition_report
from experiments.paired import paired_curves, paired_section, start_mismatches
from experiments.plots import (
    mean_curves,
    planned,
    plot_accuracy,
    plot_cohort_entropy,
    plot_entropy_histograms,
    plot_learning_efficiency,
    plot_paired_rounds,
)
from experiments.spec import Cell, Experiment
from experiments.summary import (
    SummaryRow,
    computed_by,
    computed_on,
    summarise,
    write_summary,
    write_summary_json,
)
from methods.kafal.results import CYCLES
from methods.registry import parse_config

#: How many lines of a table's difference ``check_tables`` shows.
DIFF_LINES = 40


def finished_results(experiment: Experiment, cells: Mapping[str, CellResult]) -> dict[Cell, CellResult]:
    """The results of every cell of the experiment among the finished ``cells`` (cell name -> results)."""
    return {cell: cells[cell.name] for cell in experiment.cells if cell.name in cells}


def write_tables(experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path) -> list[Path]:
    """The report's text files in ``directory``: summary.md/.csv/.json, and those the cells' records call for
    (class_accuracy.md, clients.md, decomposition.md, labelled_accuracy.md, rounds_to_reach.md)."""
    missing = [c for c in experiment.cells if c not in results]
    rows = summarise(experiment, results)
    summary = write_summary(
        experiment,
        rows,
        directory,
        missing,
        computed_on(results),
        paired_section(experiment, results),
        computed_by(results),
    )
    cycles = {cell: result.jsonl(CYCLES.file_name) for cell, result in results.items()}
    apart = [
        {"method": m.method, "baseline": m.baseline, "point": dict(m.point), "seed": m.seed}
        for m in start_mismatches(experiment, results)
    ]
    written = [summary, directory / "summary.csv", write_summary_json(experiment, results, directory, cycles, apart)]
    if results:
        written += write_class_accuracy_report(experiment, results, directory)
        written += write_clients_report(experiment, results, directory)
        written += write_decomposition_report(experiment, results, directory)
    written += write_active_learning_tables(experiment, results, directory)
    return written


def write_figures(
    experiment: Experiment, results: Mapping[Cell, CellResult], rows: list[SummaryRow], directory: Path
) -> list[Path]:
    """The PNG figures in ``directory`` (none without results; with ``compare``, each pair's per-round paired
    difference too); the entropy histograms load the dataset."""
    if not results:
        return []
    curves, plan = mean_curves(experiment, results), planned(experiment)
    num_classes = DATASETS[next(iter(results.values())).config["dataset"]].num_classes
    written = [
        plot_accuracy(curves, plan, directory / "accuracy_vs_round.png"),
        plot_accuracy(curves, plan, directory / "accuracy_vs_client_seconds.png", against_seconds=True),
        plot_learning_efficiency(rows, plan, directory / "learning_efficiency.png"),
        plot_cohort_entropy(curves, plan, num_classes, directory / "cohort_label_entropy.png"),
    ]
    if experiment.compare and (pairs := paired_curves(experiment, results)):
        written.append(plot_paired_rounds(pairs, plan, directory / "paired_difference_vs_round.png"))
    written += write_active_learning_figure(experiment, results, directory)
    histogram = experiment.histogram
    source = next((c for c in results if histogram and c.method == histogram.method), None)
    if histogram and source:
        config = parse_config(results[source].config)
        entropies = client_entropies(config, histogram.partition, experiment.clients, histogram.temperatures)
        title = (
            f"client {histogram.partition} of {experiment.clients}, {config.dataset}, initial model of {source.name}"
        )
        written.append(plot_entropy_histograms(entropies, title, directory / "entropy_histograms.png"))
    return written


def write_report(
    experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path, figures: bool = True
) -> list[Path]:
    """The tables and (with ``figures``) the figures in ``directory``; returns the files written."""
    written = write_tables(experiment, results, directory)
    if figures:
        written += write_figures(experiment, results, summarise(experiment, results), directory)
    return written


def check_tables(experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path) -> list[str]:
    """The report's text files as ``directory`` holds them against what ``results`` give now: one problem per file
    that differs (with the first lines of the difference) or is missing; none when every table is identical."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="experiments-check-") as scratch:
        for fresh in write_tables(experiment, results, Path(scratch)):
            recorded = directory / fresh.name
            if not recorded.exists():
                problems.append(f"{recorded}: missing (the report writes it)")
                continue
            old, new = recorded.read_text(), fresh.read_text()
            if old != new:
                names = f"{recorded} (recorded)", f"{fresh.name} (computed)"
                lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), *names, lineterm=""))
                more = [f"... {len(lines) - DIFF_LINES} more lines"] if len(lines) > DIFF_LINES else []
                shown = lines[:DIFF_LINES] + more
                problems.append(f"{recorded}: differs from what the recorded cells give:\n" + "\n".join(shown))
    return problems
