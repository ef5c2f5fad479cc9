"""The methods' quick-reference table (docs/methods.md, or a method page's own): a row for every registered method,
each command a `make run` whose settings the launcher accepts as written."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from benchmarks import quick_reference
from benchmarks.quick_reference import all_rows
from methods.registry import METHODS
from simulation.__main__ import check

ROWS = all_rows()


def make_run_arguments(command: str) -> argparse.Namespace:
    """What ``make run`` hands ``python -m simulation`` for ``make run [NUM_SUPERNODES=N] [RUN_CONFIG=...]``."""
    make, target, *assignments = shlex.split(command)
    assert (make, target) == ("make", "run"), command
    values = dict(assignment.split("=", 1) for assignment in assignments)
    assert set(values) <= {"NUM_SUPERNODES", "RUN_CONFIG"}, command
    return argparse.Namespace(
        run_config=values.get("RUN_CONFIG", ""),
        num_supernodes=int(values.get("NUM_SUPERNODES", 10)),
        cpus_per_client=1,
        gpus_per_client=0.0,
        ray_address="",
    )


def test_every_method_has_a_row():
    assert sorted(method for method, _ in ROWS) == sorted(METHODS)


@pytest.mark.parametrize(("method", "command"), ROWS)
def test_the_command_runs_the_method_and_its_settings_are_accepted(method: str, command: str) -> None:
    arguments = make_run_arguments(command)
    assert method == "fedft-eds" or f"method='{method}'" in arguments.run_config
    check(arguments)


def test_a_row_records_what_its_command_gave(tmp_path: Path) -> None:
    """The command runs as written in the project folder; its run's summary is read from the folder its log names."""
    (tmp_path / "summary.json").write_text(
        json.dumps({"initial_accuracy": 0.25, "best_accuracy": 0.5, "final_accuracy": 0.45, "warnings": ["w"]})
    )
    row = quick_reference.run_row(f"test -f Makefile && echo 'results written to {tmp_path}'; exit 3")
    assert row["exit_code"] == 3 and row["wall_seconds"] >= 0 and row["load_max"] >= 0
    assert (row["initial_accuracy"], row["best_accuracy"], row["final_accuracy"]) == (0.25, 0.5, 0.45)
    assert row["warnings"] == ["w"] and "results written to" in row["log_tail"]
    assert row["pretraining_round"] == "none" and row["results"] == str(tmp_path)


@pytest.mark.parametrize(
    ("phase", "expected"), [({"cached": True}, "cached"), ({"cached": False}, "ran"), (None, "none")]
)
def test_the_pretraining_round_is_named_as_the_summary_records_it(phase: dict | None, expected: str) -> None:
    assert quick_reference.pretraining_round({"pretraining_round": phase}) == expected


def test_the_table_shows_each_row_as_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Today's rows in the quick reference's order; one never run says so, one recorded for another command names
    the command it ran, one recorded before the highest load was sampled shows the load at its start alone."""
    commands = dict(ROWS)
    fedavg, fedprox, moon = "fedavg", "fedprox", "moon"
    command = commands[fedavg]
    at = {method: 2 + i for i, (method, _) in enumerate(ROWS)}
    recorded = {
        fedavg: {
            "command": command,
            "date": "2026-11-29",
            "commit": "abc1234",
            "exit_code": 0,
            "wall_seconds": 61.5,
            "load_at_start": 0.4,
            "load_max": 1.9,
            "initial_accuracy": 0.114,
            "best_accuracy": 0.727,
            "warnings": [],
            "pretraining_round": "ran",
        },
        fedprox: {
            "command": "make run OLD",
            "date": "2026-11-26",
            "exit_code": 0,
            "wall_seconds": 62.2,
            "load_at_start": 2.62,
            "initial_accuracy": 0.114,
            "best_accuracy": 0.73,
            "warnings": [],
        },
    }
    monkeypatch.setattr(quick_reference, "OUTPUT", tmp_path / "quick_reference.json")
    (tmp_path / "quick_reference.json").write_text(json.dumps(recorded))
    lines = quick_reference.recorded_figure().splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert lines[at[fedavg]] == "| `fedavg` | 0 | ran | 11.4 → 72.7 | 61.5 | 0.4 / 1.9 | 0 | 2026-11-29, abc1234 |"
    assert (
        lines[at[fedprox]] == "| `fedprox` | 0 | ? | 11.4 → 73.0 | 62.2 | 2.62 | 0 | 2026-11-26 (ran `make run OLD`) |"
    )
    assert lines[at[moon]] == f"| `{moon}` | not run | | | | | | |"
