"""The client models' view of a FedMD/FedKAD experiment (``clients.md``, written by the report when some cell records
the clients' mean accuracy): per cell, the best and final round of the clients' mean test accuracy as they arrive
from their own training ("FedMD (clients)", ``client_accuracy_mean``), after the digest
(``client_distilled_accuracy_mean``) and the global model's (``accuracy``); then the paired differences per seed of
the clients' mean for every ``compare`` pair of the file (``experiments/paired.py`` pairs the global models').
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from experiments.cell_results import CellResult
from experiments.spec import Cell, Experiment, point_label
from experiments.summary import mean_std

CLIENTS_FILE = "clients.md"

#: Round-record fields shown, with their column titles.
FIELDS = {
    "client_accuracy_mean": "clients",
    "client_distilled_accuracy_mean": "clients after digest",
    "accuracy": "global",
}


def best_and_final(rounds: Sequence[dict], field: str) -> tuple[float, float] | None:
    """The best and the last value of a round field (None when no round records it)."""
    values = [r[field] for r in rounds if r.get(field) is not None]
    return (max(values), values[-1]) if values else None


def _percent(pair: tuple[float, float] | None) -> str:
    return "–" if pair is None else f"{100 * pair[0]:.1f} / {100 * pair[1]:.1f}"


def cell_rows(experiment: Experiment, results: Mapping[Cell, CellResult]) -> tuple[list[str], dict[Cell, list[dict]]]:
    """Markdown rows per finished cell, and each finished cell's rounds."""
    rounds: dict[Cell, list[dict]] = {}
    lines = [
        "| point | method | seed | " + " | ".join(f"{t} best / final (%)" for t in FIELDS.values()) + " |",
        "|---|---|---|" + "---|" * len(FIELDS),
    ]
    for cell in experiment.cells:
        if cell not in results:
            continue
        rounds[cell] = results[cell].rounds
        values = [_percent(best_and_final(rounds[cell], f)) for f in FIELDS]
        lines.append(f"| {cell.point_label} | {cell.method} | {cell.seed} | " + " | ".join(values) + " |")
    return lines, rounds


def paired_rows(experiment: Experiment, rounds: dict[Cell, list[dict]], field: str) -> list[str]:
    """Per ``compare`` pair and grid point: method − baseline of ``field``'s best and final value, per seed."""
    by_key = {(c.point, c.method, c.seed): r for c, r in rounds.items()}
    lines = [
        "| point | method − baseline | seeds | best per seed (pts) | best mean ± std | final per seed (pts) | "
        "final mean ± std |",
        "|---|---|---|---|---|---|---|",
    ]
    for point in dict.fromkeys(c.point for c in experiment.cells):
        for method, baseline in experiment.compare.items():
            pairs: list[tuple[int, tuple[float, float], tuple[float, float]]] = []
            for s in experiment.seeds:
                if (point, method, s) in by_key and (point, baseline, s) in by_key:
                    a = best_and_final(by_key[(point, method, s)], field)
                    b = best_and_final(by_key[(point, baseline, s)], field)
                    if a is not None and b is not None:
                        pairs.append((s, a, b))
            if not pairs:
                continue
            cells = [point_label(point), f"{method} − {baseline}", " ".join(str(s) for s, _, _ in pairs)]
            for index in (0, 1):
                differences = [a[index] - b[index] for _, a, b in pairs]
                mean, std = mean_std(differences)
                wins = sum(d > 0 for d in differences)
                spread = "" if std is None else f" ± {100 * std:.1f}"
                cells += [
                    ", ".join(f"{100 * d:+.1f}" for d in differences),
                    f"{100 * mean:+.1f}{spread} ({wins}/{len(differences)} seeds ahead)",
                ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def clients_report(experiment: Experiment, results: Mapping[Cell, CellResult]) -> str:
    """clients.md's text."""
    rows, rounds = cell_rows(experiment, results)
    parts = [
        f"# {experiment.name}: client models",
        "",
        "Best / final round, test accuracy (%): the clients' mean as they arrive from their own training "
        "(FedMD (clients)), after the digest, and the global model's.",
        "",
        *rows,
        "",
    ]
    for field, title in (("client_accuracy_mean", "the clients' mean"), ("accuracy", "the global model")):
        parts += [
            f"Paired differences per seed, {title} (percentage points):",
            "",
            *paired_rows(experiment, rounds, field),
        ]
        parts.append("")
    return "\n".join(parts)


def write_clients_report(experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path) -> list[Path]:
    """``clients.md`` when some finished cell recorded the clients' mean accuracy; returns the files written."""
    if not any(r.get("client_accuracy_mean") is not None for result in results.values() for r in result.rounds):
        return []
    path = directory / CLIENTS_FILE
    path.write_text(clients_report(experiment, results))
    return [path]
