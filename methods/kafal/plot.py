"""``labelled_accuracy.png`` in a KAFAL run folder: test accuracy at each cycle's end against the labelled share
of the clients' data it trained on (from cycles.jsonl's rows).

matplotlib is optional on the server: it is imported only when the plot is written, and drawn on a Figure without
pyplot (no global backend is chosen in the server process).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from server_app.result_files import JsonValue, Row

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CYCLES_PLOT_FILE = "labelled_accuracy.png"


def _percent(value: JsonValue) -> float:
    """A recorded fraction in percent, NaN where the row has none (NaN is written as null)."""
    return math.nan if not isinstance(value, int | float) else 100 * float(value)


def cycles_figure(cycles: Sequence[Row], title: str = "") -> Figure:
    """Test accuracy at each cycle's end against the labelled share it trained on, titled ``title``."""
    from matplotlib.figure import Figure

    shares = [_percent(c.get("trained_labelled_fraction")) for c in cycles]
    accuracy = [_percent(c.get("accuracy")) for c in cycles]
    figure = Figure(figsize=(5.5, 4), layout="constrained")
    ax = figure.subplots()
    ax.plot(shares, accuracy, color="tab:blue", marker="o")
    for share, value, cycle in zip(shares, accuracy, cycles):
        ax.annotate(f"cycle {cycle['cycle']}", (share, value), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlabel("labelled share of the clients' data trained on (%)")
    ax.set_ylabel("test accuracy at the cycle's end (%)")
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=9)
    return figure


def write_cycles_plot(directory: Path, cycles: Sequence[Row], title: str = "") -> Path | None:
    """Write ``directory/labelled_accuracy.png`` (titled ``title``) from the cycles.jsonl rows; None without
    matplotlib or rows."""
    if not cycles:
        return None
    try:
        import matplotlib  # noqa: F401  (only to know whether it is installed)
    except ImportError:
        return None
    path = Path(directory) / CYCLES_PLOT_FILE
    cycles_figure(cycles, title).savefig(path, dpi=110)
    return path
