"""The experiment's figures (PNG): accuracy per round and per client second, learning efficiency, cohort
label entropy per round, and the hardened-softmax entropy histograms of the paper's Fig. 1.

Every figure draws every method and grid point the experiment file asks for: a method keeps its colour and
marker in every panel and figure (experiments/method_styles.py), one legend sits beside the panels, and what
has no results yet is marked "not run" instead of being left out. Accuracy curves start at the initial
(pretrained) model, round 0 and 0 s; the client-seconds axis is logarithmic beyond its first decade. A method
that evaluates a model of its own beside the global one (FedSplit's composed model) adds it to the accuracy
figures, dashed in the method's colour.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from experiments.cell_results import CellResult  # noqa: E402
from experiments.method_styles import MethodStyle, method_styles  # noqa: E402
from experiments.paired import PairedCurve  # noqa: E402
from experiments.spec import Cell, Experiment, point_label  # noqa: E402
from experiments.summary import SummaryRow  # noqa: E402
from methods.registry import parse_config
from run_config.defaults import load_defaults  # noqa: E402
from server_app.results import split_label  # noqa: E402
from server_app.run_plot import set_seconds_scale  # noqa: E402

NOT_RUN = "not run"
NOT_RUN_COLOUR = "grey"
COMPOSED_LABEL = "dashed: the method's\ncomposed model\n(FedSplit's {θ_meta, φ_g})"


@dataclass(frozen=True)
class Planned:
    """What the experiment file asks for, in its order: grid-point labels, method labels, number of seeds."""

    points: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: int = 1
    title: str = ""  # every figure's: the experiment, its dataset and split

    def not_run(self, ran: Iterable[str]) -> list[str]:
        """The planned methods missing from ``ran``, in the file's order."""
        present = set(ran)
        return [m for m in self.methods if m not in present]


def planned(experiment: Experiment) -> Planned:
    """The grid points and methods of every cell of the experiment, and the figures' title."""
    return Planned(
        points=tuple(dict.fromkeys(c.point_label for c in experiment.cells)),
        methods=tuple(experiment.methods),
        seeds=len(experiment.seeds),
        title=experiment_title(experiment),
    )


def experiment_title(experiment: Experiment) -> str:
    """``name: dataset, split, K clients``; the split as its grid varies it (``dirichlet-alpha`` over a grid)."""
    config = parse_config({**load_defaults(), **experiment.cells[0].overrides}) if experiment.cells else None
    if config is None:
        return experiment.name
    varied = {"partitioner", "dirichlet-alpha", "classes-per-client"} & set(experiment.grid)
    split = f"split by {', '.join(sorted(varied))}" if varied else f"{split_label(config)} split"
    return f"{experiment.name}: {config.dataset}, {split}, {experiment.clients} clients"


@dataclass(frozen=True)
class Curve:
    """One method at one grid point: per-round means over seeds (rounds all seeds reached), after round 1, 2, …;
    the initial model's accuracy (round 0) is NaN where no seed recorded it."""

    rounds: np.ndarray
    accuracy: np.ndarray
    accuracy_std: np.ndarray
    client_seconds: np.ndarray  # cumulative
    cohort_entropy: np.ndarray  # NaN where not recorded
    initial_accuracy: float = math.nan
    #: A method's own composed model (FedSplit's {θ_meta, φ_g}) where recorded, NaN elsewhere; None: never recorded.
    composed_accuracy: np.ndarray | None = None


def _round_values(rounds: Sequence[dict], key: str) -> np.ndarray:
    return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rounds])


def _initial_accuracy(cells: Sequence[CellResult]) -> float:
    """Mean over seeds of the summaries' ``initial_accuracy`` (NaN when none recorded it)."""
    values = [float(c.summary["initial_accuracy"]) for c in cells if c.summary.get("initial_accuracy") is not None]
    return float(np.mean(values)) if values else math.nan


def mean_curves(experiment: Experiment, results: Mapping[Cell, CellResult]) -> dict[str, dict[str, Curve]]:
    """Grid-point label -> method -> curve, in the file's order (only what has results)."""
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
            composed = np.array([_round_values(r, "composed_accuracy") for r in per_seed])
            curves.setdefault(point, {})[method] = Curve(
                rounds=np.arange(1, length + 1),
                accuracy=accuracy.mean(axis=0),
                accuracy_std=accuracy.std(axis=0, ddof=1) if len(cells) > 1 else np.zeros(length),
                client_seconds=seconds.mean(axis=0),
                cohort_entropy=entropy.mean(axis=0),
                initial_accuracy=_initial_accuracy(cells),
                composed_accuracy=composed.mean(axis=0) if np.isfinite(composed).any() else None,
            )
    return curves


def _panels(count: int, width: float = 5.0, height: float = 3.6, blocks: int = 1):
    """A figure with ``count`` panels (up to 3 a row), the whole grid repeated ``blocks`` times one under the
    other; returns the figure and each block's panels."""
    columns = min(count, 3)
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(
        rows * blocks, columns, figsize=(width * columns, height * rows * blocks), squeeze=False, layout="constrained"
    )
    flat = list(axes.flat)
    grids = [flat[block * rows * columns :][:count] for block in range(blocks)]
    for ax in flat:
        if not any(ax in grid for grid in grids):
            ax.set_visible(False)
    return figure, grids


def _suptitle(figure, plan: Planned) -> None:
    if plan.title:
        figure.suptitle(plan.title, fontsize=10)


def _save(figure, path: Path) -> Path:
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _panel_title(ax, point: str, missing: Sequence[str], planned_count: int) -> None:
    """The grid point, and below it the methods without results at it (the whole panel when none ran)."""
    title = point or "all cells"
    if missing and len(missing) == planned_count:
        ax.text(0.5, 0.5, NOT_RUN, transform=ax.transAxes, ha="center", va="center", fontsize=14, color=NOT_RUN_COLOUR)
    elif missing:
        title += "\n" + textwrap.fill(f"{NOT_RUN}: " + ", ".join(missing), width=50, break_on_hyphens=False)
    ax.set_title(title, fontsize=10)


def hidden_under(
    curves: Mapping[str, Mapping[str, Curve]], plan: Planned, values: Callable[[Curve], np.ndarray]
) -> dict[str, str]:
    """Method -> the method drawn later whose curve equals its own in every panel where it has one (so it hides
    it entirely, e.g. two methods with the same random cohorts); the topmost such method."""
    hidden = {}
    for index, method in enumerate(plan.methods):
        panels = [methods for methods in curves.values() if method in methods]
        for later in reversed(plan.methods[index + 1 :]):
            if panels and all(later in m and _same(values(m[method]), values(m[later])) for m in panels):
                hidden[method] = later
                break
    return hidden


def _same(first: np.ndarray, second: np.ndarray) -> bool:
    return first.shape == second.shape and bool(np.allclose(first, second, equal_nan=True))


def _method_legend(
    figure,
    plan: Planned,
    styles: Mapping[str, MethodStyle],
    ran: Iterable[str],
    extra: Sequence[Artist] = (),
    bars: bool = False,
    hidden: Mapping[str, str] | None = None,
) -> None:
    """One legend for the whole figure, right of the panels: every planned method (a line with its marker, or a
    bar's patch), "(not run)" where it has no results in the figure or "(under …)" where another method's equal
    curve covers it, then the figure's reference marks."""
    present, hidden = set(ran), hidden or {}
    labels = {m: m if m in present else f"{m} ({NOT_RUN})" for m in plan.methods}
    labels |= {m: f"{m} (under {top})" for m, top in hidden.items()}
    handles = [
        Patch(color=styles[m].colour, label=labels[m])
        if bars
        else Line2D([], [], color=styles[m].colour, marker=styles[m].marker, markersize=5, label=labels[m])
        for m in plan.methods
    ]
    figure.legend(handles=[*handles, *extra], loc="outside right center", fontsize=8, frameon=False)


def _start_and_curve(curve: Curve, against_seconds: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, accuracy and std with the initial model (round 0, 0 s) in front when it was recorded."""
    x = curve.client_seconds if against_seconds else curve.rounds
    if math.isnan(curve.initial_accuracy):
        return x, curve.accuracy, curve.accuracy_std
    return (
        np.concatenate([[0], x]),
        np.concatenate([[curve.initial_accuracy], curve.accuracy]),
        np.concatenate([[0.0], curve.accuracy_std]),
    )


def _draw_accuracy(ax, method: str, curve: Curve, style: MethodStyle, against_seconds: bool) -> None:
    """One method's mean accuracy (± std shaded); the initial model as a larger hollow marker at x = 0; a method's
    composed model, where it has one, dashed in the same colour with hollow markers at the rounds it was judged."""
    if curve.composed_accuracy is not None:
        at = np.isfinite(curve.composed_accuracy)
        x_composed = (curve.client_seconds if against_seconds else curve.rounds)[at]
        ax.plot(
            x_composed,
            100 * curve.composed_accuracy[at],
            color=style.colour,
            linestyle="--",
            marker=style.marker,
            markersize=4,
            markerfacecolor="white",
            label=f"_{method} composed",
        )
    x, accuracy, std = _start_and_curve(curve, against_seconds)
    scored = np.isfinite(accuracy)  # rounds that `evaluate-every` left unscored are left out, not drawn as gaps
    x, accuracy, std = x[scored], accuracy[scored], std[scored]
    ax.plot(x, 100 * accuracy, color=style.colour, marker=style.marker, markersize=3.5, label=method)
    ax.fill_between(x, 100 * (accuracy - std), 100 * (accuracy + std), color=style.colour, alpha=0.15, linewidth=0)
    if not math.isnan(curve.initial_accuracy):
        ax.plot(
            [0],
            [100 * curve.initial_accuracy],
            linestyle="none",
            marker=style.marker,
            markersize=8,
            markerfacecolor="white",
            markeredgecolor=style.colour,
            markeredgewidth=1.5,
        )


def _same_x_limits(axes: Sequence) -> None:
    """Every panel gets the union of the panels' x ranges, so panels compare at a glance."""
    limits = [ax.get_xlim() for ax in axes if ax.has_data()]
    if limits:
        for ax in axes:
            ax.set_xlim(min(lo for lo, _ in limits), max(hi for _, hi in limits))


def _accuracy_values(curve: Curve) -> list[float]:
    """A curve's accuracies (%) from the initial model on."""
    return [v for v in 100 * np.concatenate([[curve.initial_accuracy], curve.accuracy]) if math.isfinite(v)]


def squashed(methods: Mapping[str, Curve]) -> list[str]:
    """The methods whose curve spans under a quarter of the panel's accuracy range: another curve (a run from
    scratch climbing from 10% beside pretrained ones near 85%) stretches the axis so that they look flat."""
    spans = {m: _accuracy_values(c) for m, c in methods.items()}
    everything = [v for values in spans.values() for v in values]
    if not everything:
        return []
    whole = max(everything) - min(everything)
    return [m for m, values in spans.items() if values and 4 * (max(values) - min(values)) < whole]


def _zoom(ax, point: str, methods: Mapping[str, Curve]) -> None:
    """Limit a panel of the zoom block to the range of its squashed curves; hide it when none is squashed."""
    names = squashed(methods)
    if not names:
        ax.set_visible(False)
        return
    values = [v for m in names for v in _accuracy_values(methods[m])]
    margin = max(0.1 * (max(values) - min(values)), 0.5)
    ax.set_ylim(min(values) - margin, max(values) + margin)
    which = ", ".join(names) if len(names) <= 3 else f"the {len(names)} curves flattened above"
    ax.set_title(
        f"{point or 'all cells'}\n" + textwrap.fill(f"zoom on {which}", width=50, break_on_hyphens=False), fontsize=10
    )


def _accuracy_panel(
    ax, methods: Mapping[str, Curve], plan: Planned, styles: Mapping[str, MethodStyle], seconds: Sequence[float] | None
) -> None:
    """Every planned method that ran at one grid point, against rounds, or against ``seconds``' scale."""
    for method in plan.methods:
        if method in methods:
            _draw_accuracy(ax, method, methods[method], styles[method], seconds is not None)
    _name_starts(ax, methods)
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    if seconds is not None:
        set_seconds_scale(ax, seconds)
        scale = "0, then log scale" if ax.get_xscale() == "symlog" else "linear"
        ax.set_xlabel(f"cumulative client training seconds ({scale})")
    else:
        ax.set_xlabel("round (0 = initial model)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))


def _name_starts(ax, methods: Mapping[str, Curve]) -> None:
    """Each distinct start's accuracy (the mean over seeds of the initial model, one decimal) written beside it."""
    starts = sorted({round(100 * c.initial_accuracy, 1) for c in methods.values() if math.isfinite(c.initial_accuracy)})
    for value in starts:
        ax.annotate(f"start {value:.1f}%", (0, value), xytext=(6, -3), textcoords="offset points", fontsize=8, va="top")


def accuracy_figure(curves: Mapping[str, Mapping[str, Curve]], plan: Planned, against_seconds: bool = False) -> Figure:
    """Test accuracy (mean over seeds, ± std shaded) from the initial model on, per round or against cumulative
    client training seconds (symlog: 0, then logarithmic); one panel per planned grid point. Where one curve
    stretches a panel so far that others look flat, a second block of panels zooms in on the flattened ones."""
    styles = method_styles(plan.methods)
    seconds = [s for methods in curves.values() for c in methods.values() for s in c.client_seconds]
    zoom = any(squashed(curves.get(point, {})) for point in plan.points)
    figure, grids = _panels(len(plan.points), blocks=2 if zoom else 1)
    _suptitle(figure, plan)
    for block, axes in enumerate(grids):
        for ax, point in zip(axes, plan.points):
            methods = curves.get(point, {})
            _accuracy_panel(ax, methods, plan, styles, seconds if against_seconds else None)
            if block == 0:
                _panel_title(ax, point, plan.not_run(methods), len(plan.methods))
            else:
                _zoom(ax, point, methods)
        _same_x_limits(axes)
    start = Line2D(
        [],
        [],
        linestyle="none",
        marker="o",
        markersize=7,
        markerfacecolor="white",
        markeredgecolor="black",
        label="initial model\n(round 0, 0 s; after the\npretraining round where\nthe run has one)",
    )
    composed = [
        Line2D([], [], color="black", linestyle="--", marker="o", markerfacecolor="white", label=COMPOSED_LABEL)
        for _ in range(any(c.composed_accuracy is not None for methods in curves.values() for c in methods.values()))
    ]
    _method_legend(
        figure,
        plan,
        styles,
        {m for methods in curves.values() for m in methods},
        [start, *composed],
        hidden=hidden_under(curves, plan, lambda c: np.concatenate(_start_and_curve(c, against_seconds))),
    )
    return figure


def plot_accuracy(
    curves: Mapping[str, Mapping[str, Curve]], plan: Planned, path: Path, against_seconds: bool = False
) -> Path:
    """``accuracy_figure`` as a PNG at ``path``."""
    return _save(accuracy_figure(curves, plan, against_seconds), path)


def paired_rounds_figure(curves: Sequence[PairedCurve], plan: Planned) -> Figure:
    """Each ``compare`` pair's accuracy difference after every round (method − baseline, percentage points; mean over
    the paired seeds, ± std shaded), one panel per grid point, with the zero line: when a method's gain shows."""
    styles = method_styles(plan.methods)
    figure, (axes,) = _panels(len(plan.points))
    _suptitle(figure, plan)
    for ax, point in zip(axes, plan.points):
        drawn = [c for c in curves if point_label(c.point) == point]
        for curve in drawn:
            means, stds = curve.mean_std()
            mean = 100 * np.array(means)
            spread = 100 * np.array([0.0 if s is None else s for s in stds])
            colour = styles[curve.method].colour
            seeds = len(curve.seeds)
            label = f"{curve.method} − {curve.baseline} ({seeds} seed{'' if seeds == 1 else 's'})"
            ax.plot(curve.rounds, mean, color=colour, marker=styles[curve.method].marker, markersize=3.5, label=label)
            ax.fill_between(curve.rounds, mean - spread, mean + spread, color=colour, alpha=0.15, linewidth=0)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_title(point or "all cells", fontsize=10)
        ax.set_xlabel("round")
        ax.set_ylabel("accuracy difference (points)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, NOT_RUN, transform=ax.transAxes, ha="center", va="center", color=NOT_RUN_COLOUR)
    return figure


def plot_paired_rounds(curves: Sequence[PairedCurve], plan: Planned, path: Path) -> Path:
    return _save(paired_rounds_figure(curves, plan), path)


def _bar_label(ax, x: float, mean: float, std: float, seeds: int, planned_seeds: int) -> None:
    """The bar's value above its error bar, and how many of the planned seeds it averages when not all."""
    text = f"{mean:.3g}" if seeds >= planned_seeds else f"{mean:.3g}\n({seeds}/{planned_seeds})"
    ax.annotate(text, (x, mean + std), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=7)


def _empty_slot_label(ax, x: float, text: str) -> None:
    """Why a bar slot is empty ("not run", or no value recorded), upright from the bottom of the axes."""
    ax.text(
        x,
        0.02,
        text,
        transform=ax.get_xaxis_transform(),
        rotation=90,
        ha="center",
        va="bottom",
        fontsize=8,
        color=NOT_RUN_COLOUR,
    )


def _point_ticks(points: Sequence[str]) -> tuple[list[str], str]:
    """Tick labels for grid points and the axis title: the values alone under ``key`` when every point is one
    ``key=value``, else each point's values one per line."""
    pairs = [p.split("=", 1) for p in points]
    keys = {pair[0] for pair in pairs}
    if len(keys) == 1 and all(len(pair) == 2 and ", " not in p for pair, p in zip(pairs, points)):
        return [value for _, value in pairs], keys.pop()
    return [p.replace(", ", "\n") or "all cells" for p in points], ""


def _bar_scale(ax, means: Sequence[float], tops: Sequence[float]) -> None:
    """Logarithmic when the bars span a decade or more (FedFT beside FedAvg), else linear from 0; room above the
    tallest bar for its value."""
    if not means:
        return
    if max(means) >= 10 * min(means):
        ax.set_yscale("log")
        ax.set_ylim(top=3 * max(tops))
    else:
        ax.set_ylim(0, 1.15 * max(tops))


def learning_efficiency_figure(rows: Sequence[SummaryRow], plan: Planned) -> Figure:
    """Bars of learning efficiency (mean ± std over seeds, value on top, with the seed count where fewer than
    planned) per method, grouped by grid point; an empty slot marked "not run" for each planned method without
    results there."""
    styles = method_styles(plan.methods)
    by_cell = {(r.point_label, r.method): r for r in rows}
    width = 0.8 / len(plan.methods)
    slots = len(plan.points) * len(plan.methods)
    figure, ax = plt.subplots(figsize=(max(6.0, 0.5 * slots + 2.5), 4.2), layout="constrained")
    _suptitle(figure, plan)
    means, tops = [], []
    for p, point in enumerate(plan.points):
        for m, method in enumerate(plan.methods):
            x = p + (m - (len(plan.methods) - 1) / 2) * width
            row = by_cell.get((point, method))
            if row is None or math.isnan(row.stats["learning_efficiency"][0]):
                _empty_slot_label(ax, x, NOT_RUN if row is None else "no value")
                continue
            mean, std = row.stats["learning_efficiency"]
            ax.bar(x, mean, width, yerr=std, capsize=3, color=styles[method].colour, label=method)
            _bar_label(ax, x, mean, std or 0.0, len(row.seeds), plan.seeds)
            means.append(mean)
            tops.append(mean + (std or 0.0))
    labels, axis_label = _point_ticks(plan.points)
    ax.set_xticks(range(len(plan.points)), labels)
    ax.set_xlabel(axis_label)
    ax.set_xlim(-0.5, len(plan.points) - 0.5)
    ax.set_ylabel("learning efficiency (% per client second)")
    _bar_scale(ax, means, tops)
    ax.grid(alpha=0.3, axis="y")
    partial = any(len(r.seeds) < plan.seeds for r in rows)
    note = [Patch(visible=False, label=f"(k/{plan.seeds}): mean of k of\nthe {plan.seeds} seeds")] if partial else []
    _method_legend(figure, plan, styles, {method for _, method in by_cell}, note, bars=True)
    return figure


def plot_learning_efficiency(rows: Sequence[SummaryRow], plan: Planned, path: Path) -> Path:
    """``learning_efficiency_figure`` as a PNG at ``path``."""
    return _save(learning_efficiency_figure(rows, plan), path)


def cohort_entropy_figure(curves: Mapping[str, Mapping[str, Curve]], plan: Planned, num_classes: int) -> Figure:
    """Label entropy (bits) of each round's cohort, with FedEntOpt's check log2(C − 1) and the maximum log2 C."""
    styles = method_styles(plan.methods)
    figure, (axes,) = _panels(len(plan.points))
    _suptitle(figure, plan)
    references: list[tuple[float, Any, str]] = [(math.log2(num_classes), ":", f"log2 C = {math.log2(num_classes):.2f}")]
    if num_classes > 2:
        references.append((math.log2(num_classes - 1), "--", f"log2(C−1) = {math.log2(num_classes - 1):.2f}"))
    for ax, point in zip(axes, plan.points):
        methods = curves.get(point, {})
        for method in plan.methods:
            if method in methods:
                curve, style = methods[method], styles[method]
                ax.plot(
                    curve.rounds,
                    curve.cohort_entropy,
                    color=style.colour,
                    marker=style.marker,
                    markersize=3.5,
                    label=method,
                )
        for value, linestyle, _ in references:
            ax.axhline(value, color="grey", linestyle=linestyle)
        _panel_title(ax, point, plan.not_run(methods), len(plan.methods))
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.set_ylabel("cohort label entropy (bits)")
        ax.grid(alpha=0.3)
    _same_x_limits(axes)
    lines = [Line2D([], [], color="grey", linestyle=style, label=label) for _, style, label in references]
    _method_legend(
        figure,
        plan,
        styles,
        {m for methods in curves.values() for m in methods},
        lines,
        hidden=hidden_under(curves, plan, lambda curve: curve.cohort_entropy),
    )
    return figure


def plot_cohort_entropy(curves: Mapping[str, Mapping[str, Curve]], plan: Planned, num_classes: int, path: Path) -> Path:
    """``cohort_entropy_figure`` as a PNG at ``path``."""
    return _save(cohort_entropy_figure(curves, plan, num_classes), path)


def plot_entropy_histograms(entropies: Mapping[float, np.ndarray], title: str, path: Path, bins: int = 30) -> Path:
    """One histogram per ρ of the per-sample hardened-softmax entropy (nats), as in the paper's Fig. 1."""
    figure, (axes,) = _panels(len(entropies), width=4.0, height=3.2)
    for ax, (rho, values) in zip(axes, entropies.items()):
        ax.hist(values, bins=bins, color="tab:blue", alpha=0.8)
        ax.set_title(f"ρ = {rho:g}")
        ax.set_xlabel("entropy (nats)")
        ax.set_ylabel("samples")
    figure.suptitle(title, fontsize=10)
    return _save(figure, path)
