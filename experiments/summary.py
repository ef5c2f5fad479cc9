"""Summary of an experiment: per grid point and method, mean ± std over seeds (Markdown and CSV), and summary.json,
what every cell's run recorded that the docs' tables need, so that they can be regenerated from it alone."""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.cell_results import CellResult
from experiments.provenance import code_text
from experiments.spec import Cell, Experiment, point_label
from models.device import describe_machine

#: The machine of a cell whose summary.json has none.
NOT_RECORDED = "not recorded (cells from before 24 November 2026)"
#: summary.json field -> (column title, factor for display, decimals)
METRICS: dict[str, tuple[str, float, int]] = {
    "best_accuracy": ("best acc. (%)", 100.0, 2),
    "mean_last10_accuracy": ("last-10 mean acc. (%)", 100.0, 2),
    "learning_efficiency": ("learning efficiency (%/s)", 1.0, 3),
    "total_client_train_seconds": ("client seconds", 1.0, 1),
    "total_bytes_down": ("MB down", 1e-6, 1),
    "total_bytes_up": ("MB up", 1e-6, 1),
}
#: Columns shown only when some row has them: a method's own metrics (the base model of a FedFSC-family cell;
#: FedSplit's composed model and metadata; the clients' mean accuracy of custom-size methods), placed after the
#: best accuracy.
OPTIONAL_METRICS: dict[str, tuple[str, float, int]] = {
    "best_base_accuracy": ("best base acc. (%)", 100.0, 2),
    "best_composed_accuracy": ("best composed acc. (%)", 100.0, 2),
    "total_metadata_bytes": ("MB metadata", 1e-6, 1),
    "best_client_accuracy_mean": ("best client-mean acc. (%)", 100.0, 2),
}


def shown_metrics(rows: Sequence[SummaryRow]) -> dict[str, tuple[str, float, int]]:
    """``METRICS``, and each optional metric some row has a value of, after the best accuracy."""
    optional = {m: spec for m, spec in OPTIONAL_METRICS.items() if any(not math.isnan(r.stats[m][0]) for r in rows)}
    first, *rest = METRICS.items()
    return dict([first, *optional.items(), *rest])


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (``None`` for a single value); NaN for no values."""
    if not values:
        return math.nan, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


@dataclass(frozen=True)
class SummaryRow:
    """One method at one grid point, over the seeds that finished."""

    point: tuple[tuple[str, object], ...]
    method: str
    seeds: tuple[int, ...]
    stats: Mapping[str, tuple[float, float | None]]  # metric -> (mean, std)

    @property
    def point_label(self) -> str:
        return point_label(self.point)


def summarise(experiment: Experiment, results: Mapping[Cell, CellResult]) -> list[SummaryRow]:
    """Rows in the file's order (grid point, then method); cells without results are left out."""
    groups: dict[tuple, list[Cell]] = {}
    for cell in experiment.cells:
        if cell in results:
            groups.setdefault((cell.point, cell.method), []).append(cell)
    rows = []
    for (point, method), cells in groups.items():
        stats = {}
        for metric in [*METRICS, *OPTIONAL_METRICS]:
            values = [results[c].summary.get(metric) for c in cells]
            stats[metric] = mean_std([float(v) for v in values if v is not None])
        rows.append(SummaryRow(point, method, tuple(c.seed for c in cells), stats))
    return rows


def _fmt(mean: float, std: float | None, factor: float, decimals: int) -> str:
    if math.isnan(mean):
        return "–"
    text = f"{mean * factor:.{decimals}f}"
    return text if std is None else f"{text} ± {std * factor:.{decimals}f}"


def markdown_table(experiment: Experiment, rows: Sequence[SummaryRow]) -> str:
    """Grid values, method, number of seeds and every metric as mean ± std."""
    keys, metrics = list(experiment.grid), shown_metrics(rows)
    header = [*keys, "method", "seeds", *(title for title, _, _ in metrics.values())]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        point = dict(row.point)
        cells = [str(point[k]) for k in keys] + [row.method, str(len(row.seeds))]
        cells += [_fmt(*row.stats[m], factor, decimals) for m, (_, factor, decimals) in metrics.items()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_csv(experiment: Experiment, rows: Sequence[SummaryRow], path: Path) -> None:
    """One line per row; each metric as ``<metric>_mean`` and ``<metric>_std`` in summary.json's units."""
    keys, metrics = list(experiment.grid), shown_metrics(rows)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*keys, "method", "seeds", *(f"{m}_{s}" for m in metrics for s in ("mean", "std"))])
        for row in rows:
            point = dict(row.point)
            values = []
            for metric in metrics:
                mean, std = row.stats[metric]
                values += ["" if math.isnan(mean) else repr(mean), "" if std is None else repr(std)]
            writer.writerow([*(point[k] for k in keys), row.method, " ".join(map(str, row.seeds)), *values])


def computed_on(results: Mapping[Cell, CellResult]) -> str:
    """Which machines' servers computed the finished cells, and how many cells each: a trained model, and so a
    table's digits, differ between CPU generations (README, Quickstart)."""
    counts = Counter(
        describe_machine(machine) if (machine := result.summary.get("machine")) else NOT_RECORDED
        for result in results.values()
    )
    return _with_cell_counts(counts)


def computed_by(results: Mapping[Cell, CellResult]) -> str:
    """Which commits' code computed the finished cells, and how many cells each (``experiments/provenance.py``);
    empty when no cell recorded one."""
    counts = Counter(code_text(result.files) or "not recorded" for result in results.values())
    return "" if set(counts) == {"not recorded"} else _with_cell_counts(counts)


def _with_cell_counts(counts: Counter[str]) -> str:
    """``a (3 cells); b (1 cell)``, the most common first."""
    return "; ".join(f"{name} ({count} cell{'s' if count > 1 else ''})" for name, count in counts.most_common())


def write_summary(
    experiment: Experiment,
    rows: Sequence[SummaryRow],
    directory: Path,
    missing: Sequence[Cell],
    machines: str = "",
    extra: Sequence[str] = (),
    commits: str = "",
) -> Path:
    """summary.md (title, description, cost, table, ``extra`` lines such as the paired differences, missing cells,
    the machines of ``computed_on``, the commits of ``computed_by``) and summary.csv; returns summary.md."""
    lines = [f"# {experiment.name}", "", experiment.description.strip(), ""]
    if experiment.paper:
        lines += [f"Mirrors: {experiment.paper.strip()}", ""]
    if experiment.scaled_down:
        lines += [f"Scaled down: {experiment.scaled_down.strip()}", ""]
    lines += [
        f"Cost: {experiment.cost.strip()}",
        "",
        f"{experiment.clients} clients; mean ± sample std over seeds; learning efficiency = best accuracy (%) "
        "÷ client training seconds summed over clients and rounds; last-10 = the mean accuracy of the last 10 "
        "rounds, which over a run of 10 rounds or fewer is the mean of all of them, round 1 included.",
        "",
        markdown_table(experiment, rows),
        "",
        *extra,
    ]
    if missing:
        lines += ["Cells without results (not run yet, or failed): " + ", ".join(c.name for c in missing), ""]
    if machines:
        lines += [f"Computed on: {machines}.", ""]
    if commits:
        lines += [f"Computed by the code of commit: {commits}.", ""]
    path = directory / "summary.md"
    path.write_text("\n".join(lines))
    write_csv(experiment, rows, directory / "summary.csv")
    return path


#: summary.json's layout version: raise it when a field's meaning changes.
RECORD_FORMAT = 1
RECORD_FILE = "summary.json"
#: Round fields summary.json keeps, as one series per cell (None where a round did not record the field): the
#: global model's accuracy, and the other models and measures some methods record each round.
ROUND_FIELDS = (
    "accuracy",
    "num_examples",
    "client_train_seconds",
    "bytes_up",
    "cohort_label_entropy",
    "class_accuracy",
    "base_accuracy",
    "composed_accuracy",
    "client_accuracy_mean",
    "client_distilled_accuracy_mean",
    "consensus_accuracy",
    "fewshot_client_mean_accuracy",
)
#: Fields of an active-learning cell's cycles kept in summary.json.
CYCLE_FIELDS = ("cycle", "rounds", "trained_labelled_fraction", "labelled_fraction", "accuracy", "query_seconds")
#: Cell summary fields not copied: the cell's name, method and machine are recorded on their own, the rest is text.
_NOT_RECORDED_FIELDS = frozenset({"method", "status", "failure", "warnings", "machine", "cycles"})

Scalar = int | float | None


def _numbers(summary: Mapping[str, Any], prefix: str = "") -> dict[str, Scalar | list[float]]:
    """Every number of a cell's summary.json (and of its nested records, as ``outer.inner``), and lists of numbers."""
    numbers: dict[str, Scalar | list[float]] = {}
    for key, value in summary.items():
        if key in _NOT_RECORDED_FIELDS:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            numbers.update(_numbers(value, f"{name}."))
        elif value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            numbers[name] = value
        elif isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            numbers[name] = list(value)
    return numbers


def cell_record(cell: Cell, result: CellResult, cycles: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """One cell in summary.json: its name, method, grid point and seed, its machine and the commit of its code (where
    recorded), the numbers of its summary, each of ``ROUND_FIELDS`` that some round recorded as a series over the
    rounds, and its active-learning cycles."""
    rounds = {
        name: [r.get(name) for r in result.rounds]
        for name in ROUND_FIELDS
        if any(r.get(name) is not None for r in result.rounds)
    }
    machine = result.summary.get("machine")
    code = code_text(result.files)
    record: dict[str, Any] = {
        "name": cell.name,
        "method": cell.method,
        "point": dict(cell.point),
        "seed": cell.seed,
        "machine": describe_machine(machine) if machine else NOT_RECORDED,
        **({"code": code} if code else {}),  # cells recorded before the runner kept it have none
        "summary": _numbers(result.summary),
        "rounds": {"round": [r.get("round") for r in result.rounds], **rounds},
    }
    if cycles:
        record["cycles"] = [{k: c[k] for k in CYCLE_FIELDS if k in c} for c in cycles]
    return record


def summary_record(
    experiment: Experiment,
    results: Mapping[Cell, CellResult],
    cycles: Mapping[Cell, Sequence[Mapping[str, Any]]] | None = None,
    started_apart: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """summary.json's content: the file's name, clients, seeds, grid, methods and ``compare`` pairs, the cells not
    finished, the seeds of ``compare`` pairs whose runs started from different models (``started_apart``, only when
    there are any: ``experiments/paired.py``) and one ``cell_record`` per finished cell in the file's order."""
    cycles = cycles or {}
    apart = {"started_apart": [dict(entry) for entry in started_apart]} if started_apart else {}
    return {
        "format": RECORD_FORMAT,
        "experiment": experiment.name,
        "clients": experiment.clients,
        "seeds": list(experiment.seeds),
        "grid": {key: list(values) for key, values in experiment.grid.items()},
        "methods": list(experiment.methods),
        "compare": dict(experiment.compare),
        "missing": [c.name for c in experiment.cells if c not in results],
        **apart,
        "cells": [cell_record(c, results[c], cycles.get(c, ())) for c in experiment.cells if c in results],
    }


def write_summary_json(
    experiment: Experiment,
    results: Mapping[Cell, CellResult],
    directory: Path,
    cycles: Mapping[Cell, Sequence[Mapping[str, Any]]] | None = None,
    started_apart: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """summary.json in ``directory``: ``summary_record``, one field and one cell a line (so that a rerun cell is one
    changed line)."""
    record = summary_record(experiment, results, cycles, started_apart)
    cells = record.pop("cells")
    fields = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in record.items()]
    rows = [json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cells]
    text = "{\n " + ",\n ".join(fields) + ',\n "cells": [' + ",".join(f"\n  {row}" for row in rows) + "\n ]\n}\n"
    path = directory / RECORD_FILE
    path.write_text(text)
    return path
