"""The experiment's figures (PNG): accuracy per round and per client second, learning efficiency, cohort
label entropy per round, and the hardened-softmax entropy histograms of the paper's Fig. 1."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from experiments.cell_results import CellResult  # noqa: E402
from experiments.spec import Cell, Experiment  # noqa: E402
from experiments.summary import SummaryRow  # noqa: E402


@dataclass(frozen=True)
class Curve:
    """One method at one grid point: per-round means over seeds (rounds all seeds reached)."""

    rounds: np.ndarray
    accuracy: np.ndarray
    accuracy_std: np.ndarray
    client_seconds: np.ndarray  # cumulative
    cohort_entropy: np.ndarray  # NaN where not recorded


def _round_values(rounds: Sequence[dict], key: str) -> np.ndarray:
    return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rounds])


def mean_curves(experiment: Experiment, results: Mapping[Cell, CellResult]) -> dict[str, dict[str, Curve]]:
    """Grid-point label -> method -> curve, in the file's order."""
    grouped: dict[str, dict[str, list[CellResult]]] = {}
    for cell in experiment.cells:
        if cell in results:
            grouped.setdefault(cell.point_label, {}).setdefault(cell.method, []).append(results[cell])
    curves: dict[str, dict[str, Curve]] = {}
    for point, methods in grouped.items():
        for method, cells in methods.items():
            length = min(len(c.rounds) for c in cells)
            per_seed = [c.rounds[:length] for c in cells]
            accuracy = np.array([_round_values(r, "accuracy") for r in per_seed])
            seconds = np.array([np.cumsum(_round_values(r, "client_train_seconds")) for r in per_seed])
            entropy = np.array([_round_values(r, "cohort_label_entropy") for r in per_seed])
            curves.setdefault(point, {})[method] = Curve(
                rounds=np.arange(1, length + 1),
                accuracy=accuracy.mean(axis=0),
                accuracy_std=accuracy.std(axis=0, ddof=1) if len(cells) > 1 else np.zeros(length),
                client_seconds=seconds.mean(axis=0),
                cohort_entropy=entropy.mean(axis=0),
            )
    return curves


def _panels(count: int, width: float = 5.0, height: float = 3.6):
    columns = min(count, 3)
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return figure, list(axes.flat)


def _save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_accuracy(curves: Mapping[str, Mapping[str, Curve]], path: Path, against_seconds: bool = False) -> Path:
    """Test accuracy (mean over seeds, ± std shaded) per round, or against cumulative client seconds."""
    figure, axes = _panels(len(curves))
    for ax, (point, methods) in zip(axes, curves.items()):
        for method, curve in methods.items():
            x = curve.client_seconds if against_seconds else curve.rounds
            ax.plot(x, 100 * curve.accuracy, marker="o", markersize=3, label=method)
            ax.fill_between(x, 100 * (curve.accuracy - curve.accuracy_std),
                            100 * (curve.accuracy + curve.accuracy_std), alpha=0.2)
        ax.set_xlabel("cumulative client training seconds" if against_seconds else "round")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(point or "all cells")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(figure, path)


def plot_learning_efficiency(rows: Sequence[SummaryRow], path: Path) -> Path:
    """Bars of learning efficiency (mean ± std over seeds) per method, grouped by grid point."""
    points = list(dict.fromkeys(r.point_label for r in rows))
    methods = list(dict.fromkeys(r.method for r in rows))
    width = 0.8 / max(len(methods), 1)
    figure, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(points) * len(methods)), 4.0))
    for index, method in enumerate(methods):
        xs, means, stds = [], [], []
        for row in rows:
            if row.method == method:
                mean, std = row.stats["learning_efficiency"]
                xs.append(points.index(row.point_label) + index * width)
                means.append(mean)
                stds.append(std or 0.0)
        ax.bar(xs, means, width, yerr=stds if any(stds) else None, capsize=3, label=method)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(points))], [p or "all cells" for p in points])
    ax.set_ylabel("learning efficiency (% per client second)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return _save(figure, path)


def plot_cohort_entropy(curves: Mapping[str, Mapping[str, Curve]], num_classes: int, path: Path) -> Path:
    """Label entropy (bits) of each round's cohort, with FedEntOpt's check log2(C − 1) and the maximum log2 C."""
    figure, axes = _panels(len(curves))
    for ax, (point, methods) in zip(axes, curves.items()):
        for method, curve in methods.items():
            ax.plot(curve.rounds, curve.cohort_entropy, marker="o", markersize=3, label=method)
        ax.axhline(math.log2(num_classes), color="grey", linestyle=":", label=f"log2 C = {math.log2(num_classes):.2f}")
        if num_classes > 2:
            ax.axhline(math.log2(num_classes - 1), color="grey", linestyle="--",
                       label=f"log2(C−1) = {math.log2(num_classes - 1):.2f}")
        ax.set_xlabel("round")
        ax.set_ylabel("cohort label entropy (bits)")
        ax.set_title(point or "all cells")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(figure, path)


def plot_entropy_histograms(entropies: Mapping[float, np.ndarray], title: str, path: Path, bins: int = 30) -> Path:
    """One histogram per ρ of the per-sample hardened-softmax entropy (nats), as in the paper's Fig. 1."""
    figure, axes = _panels(len(entropies), width=4.0, height=3.2)
    for ax, (rho, values) in zip(axes, entropies.items()):
        ax.hist(values, bins=bins, color="tab:blue", alpha=0.8)
        ax.set_title(f"ρ = {rho:g}")
        ax.set_xlabel("entropy (nats)")
        ax.set_ylabel("samples")
    figure.suptitle(title, fontsize=10)
    return _save(figure, path)
