"""KAFAL's own results file, cycles.jsonl: one row per cycle, written when the cycle's last round is evaluated.

A row holds what the strategy reports at the cycle's end (its ``cycle``, ``rounds`` [first, last], labelled shares,
the query and its cost; ``restarts``: the next cycle starts its model afresh from Ω⁰), the global model's test
accuracy and loss at its end, and what its rounds and its query moved and cost. summary.json keeps a few fields of
each cycle; labelled_accuracy.png (``methods/kafal/plot.py``) plots accuracy against the labelled share.
"""

from __future__ import annotations

from collections.abc import Sequence

from methods.kafal.plot import write_cycles_plot
from server_app.result_files import JsonValue, ResultFile, Row

#: What summary.json keeps of each cycle.
SUMMARY_KEYS = ("cycle", "trained_labelled_fraction", "labelled_fraction", "accuracy", "query_seconds")


def _number(value: JsonValue) -> float:
    """A recorded count or duration, as written (an int stays an int, so the file reads the same)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return value


def _span(value: JsonValue) -> tuple[int, int]:
    """A cycle's ``rounds``: [first, last]."""
    if isinstance(value, list) and len(value) == 2:
        first, last = value
        if isinstance(first, int) and isinstance(last, int):
            return first, last
    raise TypeError(f"expected [first, last] rounds, got {value!r}")


def cycle_row(fields: Row, record: Row, rounds: Sequence[Row]) -> Row:
    """The cycle's row: its reported ``fields``, the global model's test accuracy at its end (``record``, its last
    round's), and what its rounds and its query moved and cost."""
    first, last = _span(fields["rounds"])
    in_cycle = [r for r in rounds if first <= _number(r["round"]) <= last]
    return {
        "cycle": fields["cycle"],
        "accuracy": record["accuracy"],
        "loss": record["loss"],
        **fields,
        "client_train_seconds": sum(_number(r["client_train_seconds"]) for r in in_cycle),
        "bytes_down": sum(_number(r["bytes_down"]) for r in in_cycle) + _number(fields.get("query_bytes_down", 0)),
        "bytes_up": sum(_number(r["bytes_up"]) for r in in_cycle) + _number(fields.get("query_bytes_up", 0)),
    }


def cycles_summary(rows: Sequence[Row]) -> Row:
    """summary.json's ``cycles``: a few fields of each."""
    return {"cycles": [{key: row.get(key) for key in SUMMARY_KEYS} for row in rows]}


def restarted_after(row: Row) -> int | None:
    """The cycle's last round when the next cycle starts its model afresh (rounds compared anew for collapse)."""
    return _span(row["rounds"])[1] if row.get("restarts") else None


def _percent(value: JsonValue) -> str:
    return "n/a" if value is None else f"{100 * _number(value):.1f}%"


def describe(row: Row) -> str:
    """The cycle's log line."""
    return (
        f"cycle {row['cycle']}: accuracy {_number(row['accuracy']):.4f} trained on "
        f"{_percent(row.get('trained_labelled_fraction'))} labelled; {_percent(row.get('labelled_fraction'))} "
        "labelled after its query"
    )


CYCLES = ResultFile(
    "cycles",
    row=cycle_row,
    summary=cycles_summary,
    plot=write_cycles_plot,
    restarted_after=restarted_after,
    describe=describe,
)
