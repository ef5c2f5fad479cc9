"""The FedFSC straggler suite in the rows of the thesis's Tables 4.5–4.7, with gains paired by seed
(``python -m experiments report measurements/experiments/fedfsc-table5 --fedfsc-rows`` prints it).

A FedFSC-family cell trains its base trainer's model exactly and records both accuracies, so one cell gives two of
the thesis's rows (experiments/fedfsc_table5.yaml says which). For each Dirichlet α and base trainer B (FedAvg,
FedProx, MOON) this prints B, FedFSC(B), B+, FedFSC+(B), FedFSC+(B+) and, for FedAvg, the FSCProx rows: the best
test accuracy of each (mean ± sample std over seeds), and each FedFSC row's gain over the baseline it extends,
computed per seed (same partition, same initial model) and then averaged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from experiments.cell_results import CellResult
from experiments.summary import mean_std

BASES = {"fedavg": "FedAvg", "fedprox": "FedProx", "moon": "MOON"}


@dataclass(frozen=True)
class Row:
    """One thesis row: which cell and which of its accuracies, and the row it is compared with (if any)."""

    label: str
    cell: str
    key: str
    baseline: str | None = None


def thesis_rows(base: str) -> list[Row]:
    """The rows of Tables 4.5/4.6 for base trainer ``base`` (and of Table 4.7 for FedAvg)."""
    name = BASES[base]
    rows = [
        Row(name, f"fedfsc-{base}", "best_base_accuracy"),
        Row(f"FedFSC({name})", f"fedfsc-{base}", "best_accuracy", name),
        Row(f"{name}+", f"fedfsc-plus-{base}-plus", "best_base_accuracy"),
        Row(f"FedFSC+({name})", f"fedfsc-plus-{base}", "best_accuracy", name),
        Row(f"FedFSC+({name}+)", f"fedfsc-plus-{base}-plus", "best_accuracy", f"{name}+"),
    ]
    if base == "fedavg":
        rows += [
            Row("FedAvg w/ FSCProx", "fedfsc-plus-fscprox-fedavg", "best_base_accuracy", name),
            Row("FedFSC+(FedAvg) w/ FSCProx", "fedfsc-plus-fscprox-fedavg", "best_accuracy", name),
        ]
    return rows


def row_values(results: Mapping[str, float], row: Row, alpha: str) -> dict[int, float]:
    """Seed -> the row's accuracy, from ``results`` keyed ``<cell>__dirichlet-alpha=<α>__seed<s>|<key>``."""
    prefix = f"{row.cell}__dirichlet-alpha={alpha}__seed"
    values = {}
    for name, value in results.items():
        cell, key = name.split("|")
        if key == row.key and cell.startswith(prefix):
            values[int(cell[len(prefix) :])] = value
    return values


def paired_gain(values: Mapping[int, float], baseline: Mapping[int, float]) -> list[float]:
    """Per seed, the row's accuracy minus its baseline's, for the seeds both have."""
    return [values[seed] - baseline[seed] for seed in sorted(values.keys() & baseline.keys())]


def best_accuracies(cells: Mapping[str, CellResult]) -> dict[str, float]:
    """``<cell>|<summary key>`` -> value, for every finished cell's best accuracies."""
    results = {}
    for name in sorted(cells):
        summary = cells[name].summary
        for key in ("best_accuracy", "best_base_accuracy"):
            if summary.get(key) is not None:
                results[f"{name}|{key}"] = summary[key]
    return results


def _fmt(values: list[float], signed: bool = False) -> str:
    mean, std = mean_std([100 * v for v in values])
    text = f"{mean:+.2f}" if signed else f"{mean:.2f}"
    return text + (f" ± {std:.2f}" if std is not None else "")


def markdown(results: Mapping[str, float], alphas: list[str]) -> str:
    lines = [
        "| α | row | seeds | best acc. (%) | gain over | gain, paired by seed (points) | per seed |",
        "|---|---|---|---|---|---|---|",
    ]
    for alpha in alphas:
        for base in BASES:
            rows = thesis_rows(base)
            by_label = {row.label: row_values(results, row, alpha) for row in rows}
            for row in rows:
                values = by_label[row.label]
                if not values:
                    lines.append(f"| {alpha} | {row.label} | 0 | not run | | | |")
                    continue
                gain, per_seed = "", ""
                if row.baseline is not None:
                    gains = paired_gain(values, by_label[row.baseline])
                    gain = _fmt(gains, signed=True) if gains else ""
                    per_seed = ", ".join(f"{100 * g:+.1f}" for g in gains)
                seeds = ", ".join(str(s) for s in sorted(values))
                lines.append(
                    f"| {alpha} | {row.label} | {seeds} | {_fmt(list(values.values()))} | {row.baseline or ''} "
                    f"| {gain} | {per_seed} |"
                )
    return "\n".join(lines)
