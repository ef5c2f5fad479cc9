"""Every command of the methods' quick reference (docs/methods.md), run as written: what it gave and what it cost.

    python -m benchmarks quick-reference [--only METHOD ...]

Each row's command runs in the project folder as a user types it (``make run ...``), one after another, with the
caches the machine holds (pretrained weights and pretraining rounds of earlier runs of the same model, data and
recipe are read from ``~/.cache/fedft/pretrained``). For each: its exit code, its wall time, the machine's 1-minute
load when it started and the highest seen while it ran (sampled every 5 s), and its run's start, best and final
accuracy, warnings and whether its pretraining round ran or came from the cache, read from the folder its log
names. Writes ``measurements/benchmarks/quick_reference.json``; ``--only`` replaces those rows and keeps the others.
Exits 1 when a row's command failed (or ran past an hour).
docs/benchmarks.md shows the table (``python -m benchmarks docs``).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Mapping
from typing import TypedDict

from benchmarks import PROJECT_DIR, RESULTS_DIR, LoadWatch, command_line, commit_of

NAME = "quick-reference"
PAGE = PROJECT_DIR / "docs" / "methods.md"
START, END = "<!-- quick-reference:start -->", "<!-- quick-reference:end -->"
OUTPUT = RESULTS_DIR / "quick_reference.json"
LOAD_SAMPLE_SECONDS = 5.0
#: A row still running after this long is stopped and recorded as timed out (exit code 124).
ROW_TIMEOUT_SECONDS = 3600.0


class RowResult(TypedDict):
    """What one row's command gave."""

    command: str
    date: str
    commit: str
    exit_code: int
    wall_seconds: float
    load_at_start: float
    load_max: float
    initial_accuracy: float | None
    best_accuracy: float | None
    final_accuracy: float | None
    warnings: list[str] | None
    pretraining_round: str
    results: str | None
    log_tail: str


def table_rows(text: str) -> list[tuple[str, str]]:
    """(method, command) of each row of a quick-reference table: the first column's first `name`, the second's
    code span."""
    block = text.split(START, 1)[1].split(END, 1)[0]
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        names, commands = re.findall(r"`([^`]+)`", cells[0]), re.findall(r"`([^`]+)`", cells[1])
        if names and commands:
            rows.append((names[0], commands[0]))
    return rows


def all_rows() -> list[tuple[str, str]]:
    """The rows of docs/methods.md's table, then those of a method page's own table (docs/methods/<name>.md, between
    the same markers): a method added as a package brings its row in its page."""
    rows = table_rows(PAGE.read_text())
    for page in sorted((PAGE.parent / "methods").glob("*.md")):
        if START in (text := page.read_text()):
            rows += table_rows(text)
    return rows


def pretraining_round(summary: Mapping[str, object]) -> str:
    """What a run's summary says of its pretraining round: ``ran``, ``cached`` (read from an earlier run's cache) or
    ``none`` (the method has none, or it is off)."""
    phase = summary.get("pretraining_round")
    if not isinstance(phase, Mapping):
        return "none"
    return "cached" if phase.get("cached") else "ran"


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def run_row(command: str) -> RowResult:
    """Run one row's command in the project folder and read its run's summary."""
    with LoadWatch(LOAD_SAMPLE_SECONDS) as watch:
        tick = time.perf_counter()
        try:
            done = subprocess.run(
                ["bash", "-c", command], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=ROW_TIMEOUT_SECONDS
            )
            code, log = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as err:
            code, log = 124, _text(err.stdout) + _text(err.stderr)
        seconds = time.perf_counter() - tick
    written = re.findall(r"results written to (\S+)", log)
    summary_file = PROJECT_DIR / written[-1] / "summary.json" if written else None
    summary = json.loads(summary_file.read_text()) if summary_file and summary_file.is_file() else {}
    return RowResult(
        command=command,
        date=time.strftime("%Y-%m-%d"),
        commit=commit_of(),
        exit_code=code,
        wall_seconds=round(seconds, 1),
        load_at_start=round(watch.at_start, 2),
        load_max=round(watch.highest, 2),
        initial_accuracy=summary.get("initial_accuracy"),
        best_accuracy=summary.get("best_accuracy"),
        final_accuracy=summary.get("final_accuracy"),
        warnings=summary.get("warnings"),
        pretraining_round=pretraining_round(summary),
        results=written[-1] if written else None,
        log_tail=log[-1500:] if code else "",
    )


def _percent(value: object) -> str:
    return f"{100 * value:.1f}" if isinstance(value, (int, float)) else "–"


def _row_text(method: str, command: str, row: Mapping[str, object] | None) -> str:
    """One table row: exit code, start → best, wall time, load, warnings, when and at which commit; a row recorded
    for another command than the table's today says so."""
    if row is None:
        return f"| `{method}` | not run | | | | | | |"
    warnings = row.get("warnings")
    shown = str(len(warnings)) if isinstance(warnings, list) else "–"
    load = f"{row.get('load_at_start')}" + (f" / {row['load_max']}" if "load_max" in row else "")
    when = f"{row.get('date')}" + (f", {row['commit']}" if "commit" in row else "")
    if row.get("command") != command:
        when += f" (ran `{row.get('command')}`)"
    return (
        f"| `{method}` | {row.get('exit_code')} | {row.get('pretraining_round', '?')} "
        f"| {_percent(row.get('initial_accuracy'))} → "
        f"{_percent(row.get('best_accuracy'))} | {row.get('wall_seconds')} | {load} | {shown} | {when} |"
    )


def recorded_figure() -> str:
    """The table of the recorded rows, in the quick reference's order."""
    recorded: dict[str, dict[str, object]] = json.loads(OUTPUT.read_text())
    lines = [
        "| method | exit code | pretraining round | start → best (%) | wall time (s) | load at start / highest "
        "| warnings | recorded |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row_text(method, command, recorded.get(method)) for method, command in all_rows()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--only", nargs="+", default=None, metavar="METHOD", help="rows (first column) to run")
    args = parser.parse_args(argv)
    rows = all_rows()
    unknown = set(args.only or ()) - {method for method, _ in rows}
    if unknown:
        parser.error(f"no quick-reference row for {', '.join(sorted(unknown))}")
    recorded = json.loads(OUTPUT.read_text()) if OUTPUT.is_file() else {}
    failed = 0
    for method, command in rows:
        if args.only and method not in args.only:
            continue
        recorded[method] = run_row(command)
        print(json.dumps({method: recorded[method]}), flush=True)
        OUTPUT.write_text(json.dumps(recorded, indent=1) + "\n")
        failed += recorded[method]["exit_code"] != 0
    return 1 if failed else 0
