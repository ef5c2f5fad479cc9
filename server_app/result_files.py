"""A method's own results file: the extension point by which a method adds to the run folder what only it records.

A method lists its ``ResultFile``s in ``Method.result_files`` and its server step reports rows with
``RunRecorder.report(file, fields)``. The recorder does the rest, as it does for rounds.jsonl: it completes a reported
row when the round is evaluated (``row``, with that round's record and the rounds so far), appends it to
``<name>.jsonl``, keeps the rows in every checkpoint and restores them on resume (and goes back to the checkpoint's
on a stop), adds ``summary(rows)`` to summary.json and, at the run's end, calls ``plot``. The framework names no
method's file: KAFAL's cycles.jsonl and labelled_accuracy.png are declared in ``methods/kafal/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

#: What a row of a JSON-lines file holds.
JsonValue: TypeAlias = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
Row: TypeAlias = dict[str, JsonValue]
#: (the fields reported, the evaluated round's record, every round recorded so far) -> the row written.
RowBuilder = Callable[[Row, Row, Sequence[Row]], Row]
#: The rows so far -> fields of summary.json.
RowSummary = Callable[[Sequence[Row]], Row]
#: (run folder, rows, the run's title) -> the figure written, or None (no matplotlib, nothing to draw).
RowPlot = Callable[[Path, Sequence[Row], str], Path | None]
#: A row -> the round after which the method started its model afresh on purpose (None: it did not). Collapse
#: warnings then compare later rounds only with each other.
RowRestart = Callable[[Row], int | None]
#: A row -> the line logged when it is written.
RowLog = Callable[[Row], str]

#: The framework's own JSON-lines file, which no method's file may replace.
FRAMEWORK_NAMES = frozenset({"rounds"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def reported_fields(fields: Row, record: Row, rounds: Sequence[Row]) -> Row:
    """A row as its method reported it (the default ``row``)."""
    return dict(fields)


@dataclass(frozen=True)
class ResultFile:
    """``<name>.jsonl`` in the run folder, one row per report, with what the recorder does with its rows."""

    name: str
    row: RowBuilder = reported_fields
    summary: RowSummary | None = None
    plot: RowPlot | None = None
    restarted_after: RowRestart | None = None
    describe: RowLog | None = None

    def __post_init__(self) -> None:
        """Refuse a name that is no plain file name, or that is the framework's own file."""
        if not _NAME.fullmatch(self.name) or self.name in FRAMEWORK_NAMES:
            raise ValueError(f"result file name {self.name!r}: letters, digits, '-' and '_', and not 'rounds'")

    @property
    def file_name(self) -> str:
        """Its file in the run folder."""
        return f"{self.name}.jsonl"
