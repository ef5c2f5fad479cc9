"""``accuracy.png`` in a run folder: test accuracy against round and against cumulative client training seconds.

The initial (pretrained) model is the start of both curves: a black star at round 0 and at 0 s, and a dotted
horizontal line at its accuracy across both panels. When the seconds span a decade or more the seconds axis is
"symlog": linear from 0 to the smallest recorded time, logarithmic beyond, so the 0-s start stays on the axis at
its left edge. A FedFSC-family run also draws its base model's accuracy (dashed). Rounds the server skipped
(``aggregated: false``: too few sound updates, global model kept) are red crosses, on a red band in the round
panel. The figure is drawn on a matplotlib Figure without pyplot (PNG through
the Agg canvas), so no global backend is chosen in the server process.

matplotlib is optional on the server (the lean install has none): it is imported only when a plot is written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLOT_FILE = "accuracy.png"
SKIPPED_COLOUR = "tab:red"
INITIAL_COLOUR = "black"


def _number(value: Any) -> float:
    """A recorded number, NaN where the record has none (NaN is written as null)."""
    return math.nan if value is None else float(value)


def _seconds_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks from ``low`` to the decade above ``high``; decades only where those would be more than 7."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    ticks = [m * 10.0**k for k in range(first, last + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if low <= t <= 10.0**last]
    return ticks if len(ticks) <= 7 else [t for t in ticks if math.log10(t).is_integer()]


def _seconds_label(value: float, _position: int) -> str:
    return f"{value:,.0f}" if value >= 1 or value == 0 else f"{value:g}"


def set_seconds_scale(ax: Any, seconds: Iterable[float]) -> None:
    """Linear axis when the positive ``seconds`` span less than a decade; otherwise symlog: linear from 0 up to
    the smallest positive value, logarithmic beyond, so 0 s (the initial model) stays on the axis. Ticks at 0
    and at 1-2-5 values clear of it, written as plain numbers."""
    positive = [s for s in seconds if s > 0 and math.isfinite(s)]
    if not positive or max(positive) < 10 * min(positive):
        return
    from matplotlib.ticker import FixedLocator, FuncFormatter, SymmetricalLogLocator

    threshold = min(positive)
    ax.set_xscale("symlog", linthresh=threshold, linscale=0.4)
    ax.xaxis.set_major_locator(FixedLocator([0.0, *_seconds_ticks(1.6 * threshold, max(positive))]))
    ax.xaxis.set_major_formatter(FuncFormatter(_seconds_label))
    ax.xaxis.set_minor_locator(SymmetricalLogLocator(base=10, linthresh=threshold, subs=range(2, 10)))


@dataclass(frozen=True)
class RunSeries:
    """A run's curve, starting at the initial model when its accuracy is known."""

    rounds: list[int]
    accuracy: list[float]  # percent; NaN where not recorded
    seconds: list[float]  # cumulative client training seconds
    aggregated: list[bool]
    initial_accuracy: float | None
    base_accuracy: list[float]  # percent: the base model of a FedFSC-family run, NaN where not recorded


def run_series(rounds: Sequence[Mapping[str, Any]], initial_accuracy: float | None) -> RunSeries:
    """The rounds.jsonl records as a curve, round 0 (0 s, the initial model) first when it is known."""
    series = RunSeries([], [], [], [], initial_accuracy, [])
    if initial_accuracy is not None:
        series = RunSeries([0], [100 * initial_accuracy], [0.0], [True], initial_accuracy, [100 * initial_accuracy])
    total = 0.0
    for record in rounds:
        total += float(record.get("client_train_seconds") or 0.0)
        series.rounds.append(int(record["round"]))
        series.accuracy.append(100 * _number(record.get("accuracy")))
        series.seconds.append(total)
        series.aggregated.append(record.get("aggregated", True) is not False)
        series.base_accuracy.append(100 * _number(record.get("base_accuracy")))
    return series


def _draw_panel(ax: Any, x: Sequence[float], series: RunSeries) -> None:
    """The accuracy curve against ``x``: the initial model as a star and a dotted line, skipped rounds as crosses."""
    scored = [i for i, a in enumerate(series.accuracy) if math.isfinite(a)]  # `evaluate-every` skips some rounds
    ax.plot(
        [x[i] for i in scored],
        [series.accuracy[i] for i in scored],
        color="tab:blue",
        marker="o",
        markersize=3,
        label="after round (aggregated)",
    )
    if any(math.isfinite(a) for a in series.base_accuracy[1:]):  # FedFSC: the base model beside the global one
        ax.plot(x, series.base_accuracy, color="tab:orange", linestyle="--", linewidth=1, label="base model (FedFSC)")
    skipped = [i for i, ok in enumerate(series.aggregated) if not ok]
    if skipped:
        ax.plot(
            [x[i] for i in skipped],
            [series.accuracy[i] for i in skipped],
            linestyle="none",
            marker="x",
            markersize=8,
            markeredgewidth=2,
            color=SKIPPED_COLOUR,
            label="skipped round (not aggregated)",
        )
    if series.initial_accuracy is not None:
        initial = 100 * series.initial_accuracy
        ax.axhline(initial, color=INITIAL_COLOUR, linestyle=":", linewidth=1)
        ax.plot(
            [x[0]],
            [initial],
            linestyle="none",
            marker="*",
            markersize=11,
            color=INITIAL_COLOUR,
            label=f"initial model: {initial:.1f}% (round 0, 0 s)",
        )
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)


def run_plot_figure(rounds: Sequence[Mapping[str, Any]], initial_accuracy: float | None, title: str = "") -> Any:
    """The matplotlib Figure titled ``title``: accuracy against round (left) and cumulative client seconds (right),
    one legend below them."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    series = run_series(rounds, initial_accuracy)
    figure = Figure(figsize=(10, 4.2), layout="constrained")
    if title:
        figure.suptitle(title, fontsize=10)
    by_round, by_seconds = figure.subplots(1, 2, sharey=True)
    _draw_panel(by_round, series.rounds, series)
    for index, aggregated in zip(series.rounds, series.aggregated):
        if not aggregated:
            by_round.axvspan(index - 0.5, index + 0.5, color=SKIPPED_COLOUR, alpha=0.12, linewidth=0)
    by_round.set_xlabel("round")
    by_round.xaxis.set_major_locator(MaxNLocator(integer=True))
    _draw_panel(by_seconds, series.seconds, series)
    set_seconds_scale(by_seconds, series.seconds)
    scale = "0, then log scale" if by_seconds.get_xscale() == "symlog" else "linear"
    by_seconds.set_xlabel(f"cumulative client training seconds ({scale})")
    by_seconds.yaxis.set_tick_params(labelleft=True)
    handles, labels = by_round.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8, frameon=False)
    return figure


def write_run_plot(
    directory: Path, rounds: Sequence[Mapping[str, Any]], initial_accuracy: float | None, title: str = ""
) -> Path | None:
    """Write ``directory/accuracy.png`` (titled ``title``) from the rounds.jsonl records and the initial model's
    accuracy (None when not evaluated); return its path, or None when matplotlib is not installed or there is
    nothing to plot."""
    if not rounds and initial_accuracy is None:
        return None
    try:
        import matplotlib  # noqa: F401  (only to know whether it is installed)
    except ImportError:
        return None
    path = Path(directory) / PLOT_FILE
    run_plot_figure(rounds, initial_accuracy, title).savefig(path, dpi=110)
    return path
