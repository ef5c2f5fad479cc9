"""Run every command of the methods' quick-reference table (docs/methods.md) as written, and record what it gave.

    python -m benchmarks.quick_reference [--only METHOD ...]
    python -m benchmarks.quick_reference --write-docs

Each row's command runs in the project folder as a user would type it (``make run ...``), one after another, with the
caches of the rows before it (a row whose start another row pretrained reuses it). For each: its exit code, its wall
time, the machine's load (1-minute average) when it started and when it ended, and its run's initial, best and final
accuracy and warnings (read from the folder the log names). Writes ``measurements/benchmarks/quick_reference.json``;
``--write-docs`` writes its figures into docs/methods.md's last column instead, running nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks import RESULTS_DIR

PROJECT = Path(__file__).resolve().parents[1]
PAGE = PROJECT / "docs" / "methods.md"
START, END = "<!-- quick-reference:start -->", "<!-- quick-reference:end -->"
OUTPUT = RESULTS_DIR / "quick_reference.json"


def table_rows(text: str) -> list[tuple[str, str]]:
    """(method, command) of each row of the quick-reference table: the first column's first `name`, the second's
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


def run_row(command: str) -> dict[str, Any]:
    load = os.getloadavg()[0]
    tick = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], cwd=PROJECT, capture_output=True, text=True)
    seconds = time.perf_counter() - tick
    log = done.stdout + done.stderr
    written = re.findall(r"results written to (\S+)", log)
    summary = json.loads((Path(written[-1]) / "summary.json").read_text()) if written else {}
    return {
        "command": command,
        "exit_code": done.returncode,
        "wall_seconds": round(seconds, 1),
        "load_at_start": round(load, 2),
        "load_at_end": round(os.getloadavg()[0], 2),
        "initial_accuracy": summary.get("initial_accuracy"),
        "best_accuracy": summary.get("best_accuracy"),
        "final_accuracy": summary.get("final_accuracy"),
        "warnings": summary.get("warnings"),
        "results": written[-1] if written else None,
        "log_tail": log[-1500:] if done.returncode else "",
    }


def measured_cell(row: Mapping[str, Any]) -> str:
    """docs/methods.md's last column for a recorded row: start → best accuracy, wall time, and the load it ran under
    (as it started and as it ended)."""
    if row.get("exit_code"):
        return f"exit code {row['exit_code']} ({row['date']})"
    start, best = row["initial_accuracy"], row["best_accuracy"]
    load = f"load {row['load_at_start']:.1f}" + (f"-{row['load_at_end']:.1f}" if "load_at_end" in row else "")
    return f"{100 * start:.1f} → {100 * best:.1f}%, {row['wall_seconds']:.0f} s ({load})"


def with_measurements(text: str, recorded: Mapping[str, Mapping[str, Any]]) -> str:
    """``text`` (docs/methods.md) with the last column of each quick-reference row whose method and command were
    recorded written from the recording; other rows are left as they are."""
    head, rest = text.split(START, 1)
    block, tail = rest.split(END, 1)
    lines = []
    for line in block.split("\n"):
        rows = table_rows(f"{START}\n{line}\n{END}")
        row = recorded.get(rows[0][0]) if rows else None
        if row is not None and row["command"] == rows[0][1]:
            cells = line.rstrip().rstrip("|").split("|")
            line = "|".join([*cells[:-1], f" {measured_cell(row)} "]) + "|"
        lines.append(line)
    return head + START + "\n".join(lines) + END + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="methods (first column) to run")
    parser.add_argument("--write-docs", action="store_true", help="write the recorded figures into docs/methods.md")
    args = parser.parse_args(argv)
    recorded = json.loads(OUTPUT.read_text()) if OUTPUT.is_file() else {}
    if args.write_docs:
        PAGE.write_text(with_measurements(PAGE.read_text(), recorded))
        return 0
    for method, command in all_rows():
        if args.only and method not in args.only:
            continue
        recorded[method] = {**run_row(command), "date": time.strftime("%Y-%m-%d")}
        print(json.dumps({method: recorded[method]}), flush=True)
        OUTPUT.write_text(json.dumps(recorded, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
